// The two kernels behind torch.amp.GradScaler("openreg"):
//   _amp_foreach_non_finite_check_and_unscale_  (unscale_ / step: multiply the
//       gradients by 1/scale in place, set found_inf if any is inf or nan),
//   _amp_update_scale_                          (update: back the scale off
//       after an overflow, grow it after growth_interval clean steps).
// Each runs the CPU kernel in place on host views of the device tensors: one
// pass over each gradient, no copy, found_inf and the scale written straight
// into device memory. GradScaler keeps its state on the device and only reads
// found_inf back to decide whether to skip optimizer.step().
//
// The CPU kernels check shapes and dtypes with PyTorch's messages; the device
// rules are CUDA's: every tensor on the openreg device of the others, and the
// 0-dim found_inf / inv_scale / scale tensors may not be CPU tensors (which the
// usual "CPU scalars are allowed" rule would let through).
#include <ATen/core/Tensor.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>

#include "PrivateUse1NativeFunctions.h"  // generated from csrc/aten/native_functions.yaml
#include "aten/CpuAliases.h"
#include "aten/DeviceCall.h"

namespace at::openreg {
namespace {

constexpr std::string_view kUnscaleOp = "aten::_amp_foreach_non_finite_check_and_unscale_";
constexpr std::string_view kUpdateScaleOp = "aten::_amp_update_scale_";

void check_on_openreg(DeviceCheck& check, const at::Tensor& tensor, std::string_view op, std::string_view what) {
  TORCH_CHECK(
      tensor.device().is_privateuseone(), op, ": ", what,
      " must be an openreg tensor (as on CUDA, where it must be a CUDA tensor), but got a tensor on ", tensor.device());
  check.check(tensor);
}

}  // namespace

// Registered from csrc/aten/native_functions.yaml.

void OpenRegNativeFunctions::_amp_foreach_non_finite_check_and_unscale_(
    at::TensorList scaled_grads, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  if (scaled_grads.empty()) {
    return;
  }
  DeviceCheck check(kUnscaleOp);
  check_on_openreg(check, found_inf, kUnscaleOp, "found_inf");
  check_on_openreg(check, inv_scale, kUnscaleOp, "inv_scale");
  for (const at::Tensor& grad : scaled_grads) {
    check_on_openreg(check, grad, kUnscaleOp, "each of scaled_grads");
  }
  const DeviceCall call(kUnscaleOp, check.device());
  CpuAliases views(call);
  std::vector<at::Tensor> host_grads;
  host_grads.reserve(scaled_grads.size());
  for (const at::Tensor& grad : scaled_grads) {
    host_grads.push_back(views.alias(grad));
  }
  at::Tensor host_found_inf = views.alias(found_inf);
  at::_amp_foreach_non_finite_check_and_unscale_(host_grads, host_found_inf, views.alias(inv_scale));
}

at::Tensor& OpenRegNativeFunctions::_amp_update_scale_(
    at::Tensor& current_scale, at::Tensor& growth_tracker, const at::Tensor& found_inf, double growth_factor,
    double backoff_factor, int64_t growth_interval) {
  DeviceCheck check(kUpdateScaleOp);
  check_on_openreg(check, current_scale, kUpdateScaleOp, "current_scale");
  check_on_openreg(check, growth_tracker, kUpdateScaleOp, "growth_tracker");
  check_on_openreg(check, found_inf, kUpdateScaleOp, "found_inf");
  const DeviceCall call(kUpdateScaleOp, check.device());
  CpuAliases views(call);
  at::Tensor host_scale = views.alias(current_scale);
  at::Tensor host_growth_tracker = views.alias(growth_tracker);
  at::_amp_update_scale_(
      host_scale, host_growth_tracker, views.alias(found_inf), growth_factor, backoff_factor, growth_interval);
  return current_scale;
}

}  // namespace at::openreg
