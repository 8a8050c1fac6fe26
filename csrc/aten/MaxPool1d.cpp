// max_pool1d is a composite (CompositeImplicitAutograd) with two paths: a
// dedicated CPU kernel with a contiguous output, taken on the CPU when no
// gradient is recorded, and max_pool1d_with_indices otherwise (always on other
// devices), whose output follows the input's layout. openreg takes the CPU's
// decision, so a transposed input gets the CPU's output strides. The kernel is
// registered for autograd too: a kernel for PrivateUse1 alone would leave
// AutogradPrivateUse1 without the composite, and no backward.
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/max_pool1d.h>
#include <ATen/ops/max_pool1d_native.h>
#include <torch/library.h>

#include "aten/CpuAliases.h"
#include "aten/DeviceCall.h"

namespace at::openreg {
namespace {

at::Tensor max_pool1d(
    const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool ceil_mode) {
  if ((at::GradMode::is_enabled() && self.requires_grad()) || self._fw_grad(/*level=*/0).defined()) {
    // ATen's composite itself: its argument checks and messages, then
    // max_pool1d_with_indices, the path it takes off the CPU.
    return at::native::max_pool1d(self, kernel_size, stride, padding, dilation, ceil_mode);
  }
  const DeviceCall call("aten::max_pool1d", self);
  CpuAliases views(call);
  // The host alias records no gradient, so the CPU composite takes its own kernel.
  return views.to_device(at::max_pool1d(views.alias(self), kernel_size, stride, padding, dilation, ceil_mode));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool1d", TORCH_FN(max_pool1d));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("max_pool1d", TORCH_FN(max_pool1d));
}

}  // namespace at::openreg
