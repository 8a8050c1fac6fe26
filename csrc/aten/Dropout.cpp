// native_dropout is what nn.Dropout calls for accelerator tensors. Its CPU
// kernel draws its mask from the CPU's default generator internally, where the
// fallback cannot hand it the device's generator, so it is implemented here:
// the same arithmetic as the CPU kernel, with the mask drawn from the openreg
// generator (same seed -> same mask as on the CPU).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/HostView.h"
#include "runtime/OpenRegGenerator.h"

namespace at::openreg {
namespace {

std::tuple<at::Tensor, at::Tensor> native_dropout(
    const at::Tensor& input,
    double p,
    std::optional<bool> train) {
  c10::DeviceGuard guard(input.device());
  HostViews views(input.device(), "aten::native_dropout");
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
    mask.bernoulli_(keep, c10::openreg::host_generator_for(std::nullopt, input.device()));
    output = host_input.mul(mask).mul_(scale);
  } else {
    mask = at::ones_like(host_input, host_input.options().dtype(at::kBool));
    output = host_input.clone();
  }
  return {views.to_device(output), views.to_device(mask)};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", TORCH_FN(native_dropout));
}

} // namespace at::openreg
