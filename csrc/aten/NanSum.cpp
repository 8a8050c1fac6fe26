// nansum (and through it nanmean, a composite of nansum) of complex input.
// CUDA's kernel sums complex dtypes, complex32 included, counting an element
// with a NaN part as zero (ReduceSumProdKernel.cu, nansum_kernel_cuda). The
// CPU's nansum_out refuses complex input on the CPU by a check of its own
// ("nansum on CPU does not support complex inputs"), before any kernel, so no
// wider dtype would get the call past it on the host. openreg composes the
// call from its own operators instead, which is nansum's definition: the NaNs
// replaced by zero, then sum (complex32 summed in complex64 as CUDA
// accumulates it, cuda_contract.yaml's widened sum). Every other call, and
// every call with CUDA's contract off, runs the CPU's kernel: its results, or
// its refusal.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "aten/CudaContract.h"
#include "aten/Fallback.h"

namespace at::openreg {
namespace {

// nansum(Tensor self, int[1]? dim, bool keepdim, *, ScalarType? dtype),
// and nansum.out with a trailing Tensor(a!) out.
void nansum_on_device(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t arguments = op.schema().arguments().size();
  const at::Tensor self = torch::jit::peek(*stack, 0, arguments).toTensor();
  if (!self.is_complex() || !cuda_contract_enabled()) {
    host_fallback(op, stack);
    return;
  }
  const c10::IValue& dim_value = torch::jit::peek(*stack, 1, arguments);
  const std::optional<c10::DimVector> dim =
      dim_value.isNone() ? std::nullopt : std::optional<c10::DimVector>(dim_value.toDimVector());
  const bool keepdim = torch::jit::peek(*stack, 2, arguments).toBool();
  const auto dtype = torch::jit::peek(*stack, 3, arguments).toOptional<c10::ScalarType>();
  const at::OptionalIntArrayRef dims = dim ? at::OptionalIntArrayRef(*dim) : std::nullopt;
  const at::Tensor nans_as_zero = self.masked_fill(self.isnan(), 0);
  at::Tensor result;
  if (arguments == 5) {
    result = torch::jit::peek(*stack, 4, arguments).toTensor();
    at::sum_out(result, nans_as_zero, dims, keepdim, dtype);
  } else {
    result = at::sum(nans_as_zero, dims, keepdim, dtype);
  }
  torch::jit::drop(*stack, arguments);
  torch::jit::push(*stack, std::move(result));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nansum", torch::CppFunction::makeFromBoxedFunction<&nansum_on_device>());
  m.impl("nansum.out", torch::CppFunction::makeFromBoxedFunction<&nansum_on_device>());
}

}  // namespace at::openreg
