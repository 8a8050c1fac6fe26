#pragma once

// Argument checks and result shapes of the openreg_extra operators, shared by
// their CPU, openreg and Meta kernels so that all three accept and reject the
// same calls. Written with symbolic sizes: the Meta kernels also run while
// torch.compile traces with dynamic shapes.
#include <ATen/core/Tensor.h>

namespace openreg_extra {

// rms_norm(x, eps) normalizes over the last dimension; the result has x's sizes.
void check_rms_norm(const at::Tensor& x, double eps);

// pairwise_distance_sq(a [n, d], b [m, d]) -> [n, m]. Returns {n, m}.
c10::SymDimVector pairwise_distance_sq_sizes(const at::Tensor& a, const at::Tensor& b);

}  // namespace openreg_extra
