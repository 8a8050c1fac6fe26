// Tensor.record_stream(s): marks a tensor's memory as used on stream `s`, so
// the caching allocator does not reuse it before `s` has passed this point.
#include <ATen/core/Tensor.h>

#include "PrivateUse1NativeFunctions.h"  // generated from native_functions.yaml
#include "runtime/OpenRegDeviceAllocator.h"

namespace at::openreg {

void OpenRegNativeFunctions::record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(
      stream.device_type() == c10::DeviceType::PrivateUse1,
      "record_stream: expected an openreg stream for an openreg tensor, got a stream of ", stream.device());
  c10::openreg::getDeviceAllocator()->recordStream(self.storage().data_ptr(), stream);
}

}  // namespace at::openreg
