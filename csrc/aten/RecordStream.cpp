// Tensor.record_stream(s): marks a tensor's memory as used on stream `s`, so
// the caching allocator does not reuse it before `s` has passed this point.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "runtime/OpenRegDeviceAllocator.h"

namespace at::openreg {
namespace {

void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(
      stream.device_type() == c10::DeviceType::PrivateUse1,
      "record_stream: expected an openreg stream for an openreg tensor, got a stream of ",
      stream.device());
  c10::openreg::getDeviceAllocator()->recordStream(self.storage().data_ptr(), stream);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", TORCH_FN(record_stream));
}

} // namespace at::openreg
