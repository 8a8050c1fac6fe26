#pragma once

#include <string_view>

#include <ATen/core/Tensor.h>

#include "aten/HostView.h"

namespace at::openreg {

// A sparse (COO or compressed) CPU tensor that a CPU kernel returned, as an
// openreg sparse tensor of the same layout, sizes and flags. Its component
// tensors are mapped by `views` like any strided result: a component over an
// argument's memory stays on that memory (zero copy), a fresh one is copied
// once. Layouts that hold no component tensors (mkldnn, jagged) raise
// NotImplementedError naming `op_name`, the layout and the device.
at::Tensor sparse_to_device(HostViews& views, const at::Tensor& host_sparse, std::string_view op_name);

} // namespace at::openreg
