#pragma once

#include <torch/csrc/utils/pybind.h>

namespace c10::openreg {

// torch.cuda.memory._snapshot()'s dictionary for openreg: "segments" (every
// device's), "device_traces" (one list per device, empty unless
// include_traces and history is recorded), "allocator_settings" and
// "external_annotations". Call with the GIL held.
pybind11::dict memory_snapshot_dict(bool include_traces);

}  // namespace c10::openreg
