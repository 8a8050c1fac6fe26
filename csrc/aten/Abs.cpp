// abs.out, the kernel behind torch.abs (abs itself is a composite calling
// it). abs is not structured: its native out kernel (complex input into a
// real output through a complex temporary, resize_output of `out`) runs on
// host views, so argument checks, resizing and results are the CPU's.
#include <ATen/ops/abs_native.h>

#include "PrivateUse1NativeFunctions.h" // generated from native_functions.yaml
#include "aten/DeviceCall.h"

namespace at::openreg {

at::Tensor& OpenRegNativeFunctions::abs_out(const at::Tensor& self, at::Tensor& out) {
  const DeviceCall call("aten::abs.out", self, Written{out});
  HostCall host_call(call);
  at::Tensor host_out = host_call.alias(out);
  at::native::abs_out(host_call.alias(self), host_out);
  host_call.write_back();
  return out;
}

} // namespace at::openreg
