// abs.out, the kernel behind torch.abs (abs and abs_ are composites calling
// it): the guide's DispatchStub example. ATen's abs_out builds a
// TensorIterator over the openreg tensors and calls abs_stub for PrivateUse1,
// which openreg fills (DeviceStubKernels.cpp). Complex inputs, whose abs_out
// computes into a complex temporary, run the CPU's abs_out on host views
// instead: the CPU's vectorized complex magnitude is not what a portable
// build of the loop computes, bit for bit.
#include <ATen/native/Resize.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/abs_native.h>

#include "PrivateUse1NativeFunctions.h"  // generated from native_functions.yaml
#include "aten/CpuAliases.h"
#include "aten/CudaContract.h"
#include "aten/DeviceCall.h"

namespace at::openreg {

at::Tensor& OpenRegNativeFunctions::abs_out(const at::Tensor& self, at::Tensor& out) {
  const DeviceCall call("aten::abs.out", self, Written{out});
  // CUDA's abs has bool (the identity), the CPU's loops do not: computed on
  // uint8 (cuda_contract.yaml).
  static const CudaContractRule* const rule = cuda_contract_rule("aten::abs.out");
  const c10::ScalarType wider = widened_dtype(rule, self.scalar_type());
  if (wider != c10::ScalarType::Undefined) {
    const at::Tensor abs_wider = at::abs(self.to(wider));
    at::native::resize_output(out, abs_wider.sizes());
    return out.copy_(abs_wider);
  }
  if (!self.is_complex()) {
    return at::native::abs_out(self, out);
  }
  CpuAliases host_call(call);
  at::Tensor host_out = host_call.alias(out);
  at::native::abs_out(host_call.alias(self), host_out);
  host_call.write_back();
  return out;
}

}  // namespace at::openreg
