// What Inductor's C++ wrapper and AOTInductor include for code that runs on
// openreg (torch_openreg/_inductor/cpp_wrapper.py): the CPU's runtime header
// is included beside it, since openreg's kernels are Inductor's CPU kernels.
//
// Like the rest of AOTInductor's runtime headers, it uses the C shim only
// (torch/csrc/inductor/aoti_torch/c/shim.h): the compiled model does not
// depend on torch's C++ ABI. The functions are defined in torch_openreg's
// backend library (csrc/inductor/Aoti*.cpp, and the generated
// c_shim_openreg.cpp), which the model links.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <torch/csrc/inductor/aoti_runtime/utils.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch_openreg/aoti/c_shim_openreg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct OpenRegHostAccessOpaque* OpenRegHostAccessHandle;

// Opens the runtime's scoped host access to the memory of `tensors` for a
// generated kernel, in the order of the device's current stream (the work
// queued on it finishes first): host_addresses[i] receives the address the
// kernel reads and writes for tensors[i]'s data (its data pointer itself for
// a CPU tensor). Until aoti_torch_openreg_host_access_end, the memory stays
// reachable from the host; afterwards an access faults again.
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_openreg_host_access_begin(
    const AtenTensorHandle* tensors, int64_t count, void** host_addresses, OpenRegHostAccessHandle* access);
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_openreg_host_access_end(OpenRegHostAccessHandle access);

// The copy on the current openreg device of a model constant AOTInductor's
// runtime keeps in host memory (a CPU tensor; an openreg tensor is returned
// as it is), made at the first call on that device and owned by the constant
// (`device_constant` is borrowed). See csrc/inductor/AotiConstants.cpp.
AOTI_TORCH_EXPORT AOTITorchError
aoti_torch_openreg_device_constant(AtenTensorHandle host_constant, AtenTensorHandle* device_constant);

// The device and stream guards of a generated wrapper (c10::openreg's
// OpenRegGuard and OpenRegStreamGuard). `stream` is a runtime stream handle
// (orStream_t; null: the device's default stream), as AOTInductor's run()
// receives it.
typedef struct OpenRegDeviceGuardOpaque* OpenRegDeviceGuardHandle;
typedef struct OpenRegStreamGuardOpaque* OpenRegStreamGuardHandle;
AOTI_TORCH_EXPORT AOTITorchError
aoti_torch_openreg_create_device_guard(int32_t device_index, OpenRegDeviceGuardHandle* guard);
AOTI_TORCH_EXPORT AOTITorchError
aoti_torch_openreg_device_guard_set_index(OpenRegDeviceGuardHandle guard, int32_t device_index);
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_openreg_delete_device_guard(OpenRegDeviceGuardHandle guard);
AOTI_TORCH_EXPORT AOTITorchError
aoti_torch_openreg_create_stream_guard(void* stream, int32_t device_index, OpenRegStreamGuardHandle* guard);
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_openreg_delete_stream_guard(OpenRegStreamGuardHandle guard);

#ifdef __cplusplus
}  // extern "C"

namespace torch_openreg::aoti {

// A generated kernel call on openreg tensors:
//   { HostAccess<2> host({arg0_1, buf0});
//     cpp_fused_add_0((const float*)(host[0]), (float*)(host[1])); }
template <size_t N>
class HostAccess {
 public:
  explicit HostAccess(const std::array<AtenTensorHandle, N>& tensors) {
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_openreg_host_access_begin(tensors.data(), N, addresses_.data(), &access_));
  }
  ~HostAccess() {
    // Ending an access cannot fail (it always returns AOTI_TORCH_SUCCESS).
    aoti_torch_openreg_host_access_end(access_);
  }
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;

  void* operator[](size_t i) const {
    return addresses_[i];
  }

 private:
  std::array<void*, N> addresses_{};
  OpenRegHostAccessHandle access_ = nullptr;
};

// `auto& weight = constants_->at(0);` in an AOTInductor model's run, on openreg.
inline torch::aot_inductor::ConstantHandle device_constant(const torch::aot_inductor::ConstantHandle& host_constant) {
  AtenTensorHandle device_constant = nullptr;
  AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_openreg_device_constant(host_constant, &device_constant));
  return torch::aot_inductor::ConstantHandle(device_constant);
}

// `DeviceGuard device_guard(1);` in a C++ wrapper, `StreamGuard
// stream_guard(stream, this->device_idx_);` in an AOTInductor model's run
// (device_op_overrides.py names them).
class DeviceGuard {
 public:
  explicit DeviceGuard(int32_t device_index) {
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_openreg_create_device_guard(device_index, &guard_));
  }
  ~DeviceGuard() {
    aoti_torch_openreg_delete_device_guard(guard_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  void set_index(int32_t device_index) {
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_openreg_device_guard_set_index(guard_, device_index));
  }

 private:
  OpenRegDeviceGuardHandle guard_ = nullptr;
};

class StreamGuard {
 public:
  StreamGuard(void* stream, int32_t device_index) {
    AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_openreg_create_stream_guard(stream, device_index, &guard_));
  }
  ~StreamGuard() {
    aoti_torch_openreg_delete_stream_guard(guard_);
  }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  OpenRegStreamGuardHandle guard_ = nullptr;
};

}  // namespace torch_openreg::aoti
#endif
