// CPU kernels of openreg_extra: plain loops over contiguous copies of the
// inputs, accumulating in double.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include "extra_ops/ExtraOps.h"

namespace openreg_extra {

at::Tensor rms_norm_cpu(const at::Tensor& x, double eps) {
  check_rms_norm(x, eps);
  const at::Tensor input = x.contiguous();
  at::Tensor result = at::empty(input.sizes(), input.options());
  const int64_t cols = input.size(-1);
  const int64_t rows = cols == 0 ? 0 : input.numel() / cols;
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "openreg_extra::rms_norm", [&] {
    const scalar_t* in = input.const_data_ptr<scalar_t>();
    scalar_t* out = result.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const scalar_t* row = in + r * cols;
        double sum_sq = 0;
        for (int64_t c = 0; c < cols; ++c) {
          sum_sq += static_cast<double>(row[c]) * static_cast<double>(row[c]);
        }
        const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(cols) + eps);
        for (int64_t c = 0; c < cols; ++c) {
          out[r * cols + c] = static_cast<scalar_t>(static_cast<double>(row[c]) * inv_rms);
        }
      }
    });
  });
  return result;
}

at::Tensor pairwise_distance_sq_cpu(const at::Tensor& a, const at::Tensor& b) {
  pairwise_distance_sq_sizes(a, b);
  const at::Tensor lhs = a.contiguous();
  const at::Tensor rhs = b.contiguous();
  const int64_t n = lhs.size(0);
  const int64_t m = rhs.size(0);
  const int64_t d = lhs.size(1);
  at::Tensor result = at::empty({n, m}, lhs.options());
  AT_DISPATCH_FLOATING_TYPES(lhs.scalar_type(), "openreg_extra::pairwise_distance_sq", [&] {
    const scalar_t* pa = lhs.const_data_ptr<scalar_t>();
    const scalar_t* pb = rhs.const_data_ptr<scalar_t>();
    scalar_t* out = result.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        for (int64_t j = 0; j < m; ++j) {
          double sum = 0;
          for (int64_t k = 0; k < d; ++k) {
            const double diff = static_cast<double>(pa[i * d + k]) - static_cast<double>(pb[j * d + k]);
            sum += diff * diff;
          }
          out[i * m + j] = static_cast<scalar_t>(sum);
        }
      }
    });
  });
  return result;
}

}  // namespace openreg_extra
