// The CPU and openreg kernels of openreg_extra: one function per operator,
// registered for both dispatch keys (operators.yaml).
//
// This library does not link against torch_openreg._C (it must load into any
// process that has the backend, whichever way the backend was loaded), so it
// cannot open host views of device memory. Its kernels compose ATen operators
// instead, which the backend runs on the device; composing the same operators
// on both devices is what makes the openreg result equal the CPU's bit for
// bit (a loop written for the CPU alone would round differently). The results
// are made contiguous, as the Meta kernels' are.
#include <ATen/TensorOperators.h>
#include <ATen/ops/rsqrt.h>
#include <c10/core/DeviceGuard.h>

#include "extra_ops/ExtraOps.h"

namespace openreg_extra {

at::Tensor rms_norm_kernel(const at::Tensor& x, double eps) {
  check_rms_norm(x, eps);
  const c10::DeviceGuard guard(x.device());
  return (x * at::rsqrt(x.square().mean(-1, /*keepdim=*/true) + eps)).contiguous();
}

at::Tensor pairwise_distance_sq_kernel(const at::Tensor& a, const at::Tensor& b) {
  pairwise_distance_sq_sizes(a, b);
  const c10::DeviceGuard guard(a.device());
  return (a.unsqueeze(1) - b.unsqueeze(0)).square().sum(-1).contiguous();
}

}  // namespace openreg_extra
