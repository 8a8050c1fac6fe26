// The device and stream guards of Inductor's C++ wrapper and AOTInductor
// models on openreg: the C functions torch_openreg/aoti/openreg.h declares,
// over the backend's typed guards.

#include <torch_openreg/aoti/openreg.h>

#include <torch/csrc/inductor/aoti_torch/utils.h>

#include "runtime/OpenRegGuard.h"
#include "runtime/OpenRegStream.h"

struct OpenRegDeviceGuardOpaque {
  c10::openreg::OpenRegGuard guard;
};

struct OpenRegStreamGuardOpaque {
  c10::openreg::OpenRegStreamGuard guard;
};

AOTITorchError aoti_torch_openreg_create_device_guard(int32_t device_index, OpenRegDeviceGuardHandle* guard) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    *guard = new OpenRegDeviceGuardOpaque{c10::openreg::OpenRegGuard(static_cast<c10::DeviceIndex>(device_index))};
  });
}

AOTITorchError aoti_torch_openreg_device_guard_set_index(OpenRegDeviceGuardHandle guard, int32_t device_index) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ guard->guard.set_index(static_cast<c10::DeviceIndex>(device_index)); });
}

AOTITorchError aoti_torch_openreg_delete_device_guard(OpenRegDeviceGuardHandle guard) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ delete guard; });
}

AOTITorchError aoti_torch_openreg_create_stream_guard(
    void* stream, int32_t device_index, OpenRegStreamGuardHandle* guard) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    const auto index = static_cast<c10::DeviceIndex>(device_index);
    const c10::openreg::OpenRegStream openreg_stream = stream == nullptr
        ? c10::openreg::getDefaultOpenRegStream(index)
        : c10::openreg::getStreamFromExternal(static_cast<orStream_t>(stream), index);
    *guard = new OpenRegStreamGuardOpaque{c10::openreg::OpenRegStreamGuard(openreg_stream)};
  });
}

AOTITorchError aoti_torch_openreg_delete_stream_guard(OpenRegStreamGuardHandle guard) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ delete guard; });
}
