#pragma once

#include <torch/csrc/utils/pybind.h>

namespace c10d::openreg {

// Adds the ProcessGroupOpenReg class to torch_openreg._C.
void bind_process_group(pybind11::module& m);

}  // namespace c10d::openreg
