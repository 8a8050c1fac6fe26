// sum (sum.dim_IntList, sum.IntList_out): the reduction runs on host views,
// through libtorch's own structured impl, so it builds the CPU's reduction
// iterator and sums in the CPU's order (half and bfloat16 accumulate in float
// across every reduced dimension and round once, as on the CPU). Unlike the
// elementwise stub operators (StubKernels.cpp) there is no direct path: the
// output's dtype and the accumulation buffer are decided by impl() itself.
#include <ATen/native/Resize.h>
#include <ATen/ops/sum_native.h>

#include "PrivateUse1NativeFunctions.h"  // generated from native_functions.yaml
#include "aten/CpuAliases.h"
#include "aten/CudaContract.h"
#include "aten/DeviceCall.h"
#include "aten/StructuredKernel.h"

namespace at::openreg {
namespace {

struct sum_op {
  using Native = at::native::structured_sum_out;
};

c10::MaybeOwned<at::Tensor> sum_on_host(
    std::string_view name, const at::Tensor& out, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
    std::optional<c10::ScalarType> dtype) {
  const DeviceCall call(name, self, Written{out});
  CpuAliases host_call(call);
  StructuredKernel<sum_op, /*HostOutput=*/true> kernel(out, &host_call);
  const at::Tensor host_self = host_call.alias(self);
  kernel.meta(host_self, dim, keepdim, dtype);
  kernel.impl(host_self, dim, keepdim, dtype, kernel.output());
  host_call.write_back();
  return kernel.take_result();
}

}  // namespace

at::Tensor OpenRegNativeFunctions::sum(
    const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
  // CUDA sums complex32 in complex<float> and rounds once; the CPU's kernel
  // has no complex32: the host sums in complex64 (cuda_contract.yaml).
  static const CudaContractRule* const rule = cuda_contract_rule("aten::sum.dim_IntList");
  const c10::ScalarType result = dtype.value_or(self.scalar_type());
  const c10::ScalarType wider = widened_dtype(rule, result);
  if (wider != c10::ScalarType::Undefined) {
    return sum(self, dim, keepdim, wider).to(result);
  }
  return *sum_on_host("aten::sum.dim_IntList", at::Tensor(), self, dim, keepdim, dtype);
}

at::Tensor& OpenRegNativeFunctions::sum_out(
    const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
    at::Tensor& out) {
  // As sum's (the out= overload's result has out's dtype).
  static const CudaContractRule* const rule = cuda_contract_rule("aten::sum.IntList_out");
  const c10::ScalarType wider = widened_dtype(rule, out.scalar_type());
  if (wider != c10::ScalarType::Undefined) {
    const at::Tensor sum_wider = sum(self, dim, keepdim, wider);
    at::native::resize_output(out, sum_wider.sizes());
    return out.copy_(sum_wider);
  }
  sum_on_host("aten::sum.IntList_out", out, self, dim, keepdim, dtype);
  return out;
}

}  // namespace at::openreg
