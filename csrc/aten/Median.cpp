// median / nanmedian along a dimension. The CPU kernel makes the reduced
// dimension contiguous only when its stride is greater than 1, then reads the
// elements at consecutive addresses; for an expanded dimension (stride 0) it
// reads past the input's storage, so the CPU's values and indices there are
// whatever memory follows (PyTorch bug, torch 2.13). On openreg the same read
// would reach other allocations, so such an input is materialised first, as
// CUDA's kernel always does: openreg then gives the CPU's result for the same
// values laid out densely. Every other input runs the CPU kernel unchanged.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include "aten/Fallback.h"

namespace at::openreg {
namespace {

// median.dim_values / nanmedian.dim_values:
// (Tensor self, int dim, bool keepdim, *, Tensor(a!) values, Tensor(b!) indices)
constexpr size_t kArguments = 5;

void median_dim_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  c10::IValue& self_value = torch::jit::peek(*stack, 0, kArguments);
  const int64_t dim = torch::jit::peek(*stack, 1, kArguments).toInt();
  if (self_value.isTensor()) {
    const at::Tensor& self = self_value.toTensor();
    const int64_t rank = self.dim();
    // An out-of-range dim is left to the CPU kernel, which raises its own error.
    if (rank > 0 && dim >= -rank && dim < rank) {
      const int64_t wrapped = dim < 0 ? dim + rank : dim;
      if (self.stride(wrapped) == 0 && self.size(wrapped) > 1) {
        self_value = self.contiguous();
      }
    }
  }
  host_fallback(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("median.dim_values", torch::CppFunction::makeFromBoxedFunction<&median_dim_on_host>());
  m.impl("nanmedian.dim_values", torch::CppFunction::makeFromBoxedFunction<&median_dim_on_host>());
}

}  // namespace at::openreg
