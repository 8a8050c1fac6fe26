// native_dropout is what nn.Dropout calls for accelerator tensors. Its CPU
// kernel draws its mask from the CPU's default generator internally, where the
// fallback cannot hand it the device's generator, so it is implemented here:
// the same arithmetic as the CPU kernel, with the mask drawn from the openreg
// generator (same seed -> same mask as on the CPU). Its results, and the
// backward's, are written in device memory in one pass each: the CPU's
// kernels multiply by the mask after copying it into the input's dtype and
// return CPU memory, which the fallback would then copy to the device.
//
// dropout itself is a composite that sends accelerator inputs (CUDA, XPU,
// PrivateUse1) to native_dropout and CPU inputs to an unfused path: a noise
// tensor in the input's dtype, bernoulli_(1 - p), div_(1 - p), input * noise.
// Both draw the same mask and give the same values in float32, but in
// float16/bfloat16 the gradients differ (the scaling is rounded at another
// step), so openreg takes the CPU's path for those two dtypes.

// Loops.h's cpu_kernel trips GCC 12's maybe-uninitialized false positive in
// TensorIterator's SmallVector, as in DeviceStubKernels.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/cpu/Loops.h>
#include <ATen/ops/dropout_native.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/native_dropout_backward.h>
#include <ATen/ops/ones_like.h>
#include <torch/library.h>

#include "aten/CpuAliases.h"
#include "aten/DeviceCall.h"
#include "aten/CpuAllocationsOnDevice.h"

namespace at::openreg {
namespace {

bool has_fused_kernel(const at::Tensor& values, const at::Tensor& mask) {
  return at::isFloatingType(values.scalar_type()) && mask.scalar_type() == at::kBool;
}

// values * mask * scale as the CPU computes `values.mul(mask).mul_(scale)`:
// the product with the 0/1 mask rounded to the values' dtype (a negative
// value times a dropped element is -0), then the product with the scale,
// which C++'s Tensor::mul_(Scalar) first rounds to the values' dtype (Python's
// `mul_(float)` does not: for float16 they differ). The output is laid out
// by the iterator, as the CPU's is.
// Host views in, a host result out (device memory inside an
// AllocateResultsOnDevice scope).
at::Tensor masked_scale(const at::Tensor& values, const at::Tensor& mask, double scale) {
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .add_owned_output(at::Tensor())
                                .add_const_input(values)
                                .add_const_input(mask)
                                .check_all_same_dtype(false)
                                .declare_static_dtype(values.scalar_type())
                                .build();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, values.scalar_type(), "openreg_masked_scale", [&] {
    using math_t = at::opmath_type<scalar_t>;
    const auto s = static_cast<math_t>(static_cast<scalar_t>(scale));
    at::native::cpu_kernel(iter, [=](scalar_t value, bool keep) -> scalar_t {
      const auto kept = static_cast<scalar_t>(static_cast<math_t>(value) * static_cast<math_t>(keep));
      return static_cast<scalar_t>(static_cast<math_t>(kept) * s);
    });
  });
  return iter.output();
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  const DeviceCall call("aten::native_dropout", input);
  CpuAliases views(call);
  const at::Tensor host_input = views.alias(input);
  const AllocateResultsOnDevice on_device;
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
    output =
        has_fused_kernel(host_input, mask) ? masked_scale(host_input, mask, scale) : host_input.mul(mask).mul_(scale);
  } else {
    mask = at::ones_like(host_input, host_input.options().dtype(at::kBool));
    output = host_input.clone();
  }
  return {views.to_device(output), views.to_device(mask)};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  const DeviceCall call("aten::native_dropout_backward", grad, mask);
  CpuAliases views(call);
  const AllocateResultsOnDevice on_device;
  const at::Tensor host_grad = views.alias(grad);
  const at::Tensor host_mask = views.alias(mask);
  // Any other dtype, and the CPU's errors (a mask that is not bool), from the
  // CPU's kernel.
  return views.to_device(
      has_fused_kernel(host_grad, host_mask) ? masked_scale(host_grad, host_mask, scale)
                                             : at::native_dropout_backward(host_grad, host_mask, scale));
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", TORCH_FN(native_dropout));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
  m.impl("dropout", TORCH_FN(dropout));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("dropout", TORCH_FN(dropout));
}

}  // namespace at::openreg
