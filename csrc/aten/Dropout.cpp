// native_dropout is what nn.Dropout calls for accelerator tensors. Its CPU
// kernel draws its mask from the CPU's default generator internally, where the
// fallback cannot hand it the device's generator, so it is implemented here:
// the same arithmetic as the CPU kernel, with the mask drawn from the openreg
// generator (same seed -> same mask as on the CPU).
//
// dropout itself is a composite that sends accelerator inputs (CUDA, XPU,
// PrivateUse1) to native_dropout and CPU inputs to an unfused path: a noise
// tensor in the input's dtype, bernoulli_(1 - p), div_(1 - p), input * noise.
// Both draw the same mask and give the same values in float32, but in
// float16/bfloat16 the gradients differ (the scaling is rounded at another
// step), so openreg takes the CPU's path for those two dtypes.
#include <ATen/core/Tensor.h>
#include <ATen/ops/dropout_native.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones_like.h>
#include <torch/library.h>

#include "aten/DeviceCall.h"

namespace at::openreg {
namespace {

std::tuple<at::Tensor, at::Tensor> native_dropout(
    const at::Tensor& input,
    double p,
    std::optional<bool> train) {
  const DeviceCall call("aten::native_dropout", input);
  HostCall views(call);
  const at::Tensor host_input = views.alias(input);
  at::Tensor output;
  at::Tensor mask;
  if (input.numel() == 0) {
    output = host_input;
    mask = at::empty_like(host_input);
  } else if (train.value_or(true)) {
    const double keep = 1. - p;
    const double scale = keep == 0 ? 0. : 1. / keep;
    // A bool mask laid out like the input (empty_like preserves a dense
    // layout): bernoulli_ fills it in memory order, so a permuted input gets
    // the CPU's mask only if the mask is permuted the same way.
    mask = at::empty_like(host_input, host_input.options().dtype(at::kBool));
    mask.bernoulli_(keep, views.generator(std::nullopt));
    output = host_input.mul(mask).mul_(scale);
  } else {
    mask = at::ones_like(host_input, host_input.options().dtype(at::kBool));
    output = host_input.clone();
  }
  return {views.to_device(output), views.to_device(mask)};
}

// Registered for autograd too (a kernel for PrivateUse1 alone would leave
// AutogradPrivateUse1 without the composite): the CPU's path records the
// multiplication by the noise, as on the CPU.
at::Tensor dropout(const at::Tensor& input, double p, bool train) {
  const bool reduced_float = input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16;
  // The composite's condition for the fused kernel, device aside; every other
  // case (eval, p of 0 or 1, empty, bad p) is the same on every device.
  if (reduced_float && train && p > 0 && p < 1 && input.numel() > 0) {
    at::Tensor noise = at::empty_like(input);
    noise.bernoulli_(1 - p);
    noise.div_(1 - p);
    return input.mul(noise);
  }
  return at::native::dropout(input, p, train);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", TORCH_FN(native_dropout));
  m.impl("dropout", TORCH_FN(dropout));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("dropout", TORCH_FN(dropout));
}

} // namespace at::openreg
