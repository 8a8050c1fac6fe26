// openreg_extra: an operator library built separately from torch_openreg and
// loaded at run time:
//
//   torch.ops.load_library(torch_openreg.extra_ops_path())
//
// Loading it runs the static registrations generated from
// torch_openreg/ops/operators.yaml (the schemas and every kernel); nothing
// imports it implicitly. This file holds the shape checks and the Meta kernels
// (the shape functions, which serve the meta device, FakeTensorMode and
// torch.compile tracing); Kernels.cpp the CPU and openreg kernels.
#include "extra_ops/ExtraOps.h"

#include "aten/DeviceCheck.h"

#include <ATen/ops/empty.h>

namespace openreg_extra {

void check_rms_norm(const at::Tensor& x, double eps) {
  TORCH_CHECK(
      x.dim() >= 1, "openreg_extra::rms_norm: expected a tensor with at least one dimension, but got a ", x.dim(),
      "-d tensor on ", x.device());
  TORCH_CHECK(
      x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
      "openreg_extra::rms_norm: expected float32 or float64, but got ", x.scalar_type(), " on ", x.device());
  TORCH_CHECK(eps >= 0, "openreg_extra::rms_norm: expected eps >= 0, but got ", eps);
}

c10::SymDimVector pairwise_distance_sq_sizes(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(
      a.dim() == 2 && b.dim() == 2,
      "openreg_extra::pairwise_distance_sq: expected 2-d tensors [n, d] and [m, d], but got sizes ", a.sym_sizes(),
      " and ", b.sym_sizes());
  TORCH_SYM_CHECK(
      a.sym_size(1).sym_eq(b.sym_size(1)),
      "openreg_extra::pairwise_distance_sq: a and b must have the same number of columns, but got sizes ",
      a.sym_sizes(), " and ", b.sym_sizes());
  if (a.device() != b.device()) {
    at::openreg::device_mismatch("openreg_extra::pairwise_distance_sq", a.device(), b.device());
  }
  TORCH_CHECK(
      a.scalar_type() == b.scalar_type() && (a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble),
      "openreg_extra::pairwise_distance_sq: expected a and b both float32 or both float64, but got ", a.scalar_type(),
      " and ", b.scalar_type());
  return {a.sym_size(0), b.sym_size(0)};
}

// Both results are contiguous, whatever the layout of the inputs.

at::Tensor rms_norm_meta(const at::Tensor& x, double eps) {
  check_rms_norm(x, eps);
  return at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor pairwise_distance_sq_meta(const at::Tensor& a, const at::Tensor& b) {
  return at::empty_symint(pairwise_distance_sq_sizes(a, b), a.options());
}

}  // namespace openreg_extra
