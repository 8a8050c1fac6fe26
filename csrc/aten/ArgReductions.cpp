// argmax and argmin (functional and out=): ATen's structured kernels, whose
// impl() builds a reduction iterator over the openreg tensors and calls
// argmax_stub / argmin_stub for PrivateUse1, which openreg fills
// (DeviceStubKernels.cpp): the guide's DispatchStub way for a reduction.
// StructuredKernel completes the native class as torchgen does for in-tree
// backends (the output allocated in device memory, or out= checked and
// resized).
#include <ATen/ops/argmax_native.h>
#include <ATen/ops/argmin_native.h>

#include "PrivateUse1NativeFunctions.h"  // generated from native_functions.yaml
#include "aten/DeviceCall.h"
#include "aten/StructuredKernel.h"

namespace at::openreg {
namespace {

struct argmax_op {
  using Native = at::native::structured_argmax_out;
};
struct argmin_op {
  using Native = at::native::structured_argmin_out;
};

template <typename Op>
c10::MaybeOwned<at::Tensor> index_reduction(
    std::string_view name, const at::Tensor& out, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  const DeviceCall call(name, self, Written{out});
  StructuredKernel<Op, /*HostOutput=*/false> kernel(out);
  kernel.meta(self, dim, keepdim);
  kernel.impl(self, dim, keepdim, kernel.output());
  return kernel.take_result();
}

}  // namespace

at::Tensor OpenRegNativeFunctions::argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  return *index_reduction<argmax_op>("aten::argmax", at::Tensor(), self, dim, keepdim);
}

at::Tensor& OpenRegNativeFunctions::argmax_out(
    const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  index_reduction<argmax_op>("aten::argmax.out", out, self, dim, keepdim);
  return out;
}

at::Tensor OpenRegNativeFunctions::argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  return *index_reduction<argmin_op>("aten::argmin", at::Tensor(), self, dim, keepdim);
}

at::Tensor& OpenRegNativeFunctions::argmin_out(
    const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  index_reduction<argmin_op>("aten::argmin.out", out, self, dim, keepdim);
  return out;
}

}  // namespace at::openreg
