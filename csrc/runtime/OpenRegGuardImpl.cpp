// Registers the openreg guard implementation (OpenRegGuardImpl.h) for
// generic code (c10::DeviceGuard, c10::Event, torch.accelerator.*), and
// defines its methods that are not on the typed guards' hot path.
#include "runtime/OpenRegGuardImpl.h"

#include "runtime/OpenRegDeviceAllocator.h"
#include "runtime/OpenRegEvent.h"
#include "runtime/OpenRegSynchronizingCall.h"

namespace c10::openreg::impl {

// The device and stream methods the typed guards use are inline in the header.

Stream OpenRegGuardImpl::getDefaultStream(Device device) const {
  return getDefaultOpenRegStream(device.index());
}

Stream OpenRegGuardImpl::getNewStream(Device device, int priority) const {
  return getStreamFromPool(priority, device.index());
}

Stream OpenRegGuardImpl::getStreamFromGlobalPool(Device device, bool isHighPriority) const {
  return getStreamFromPool(isHighPriority, device.index());
}

void* OpenRegGuardImpl::getStreamNativeHandle(const Stream stream) const {
  return OpenRegStream(stream).handle();
}

// Device memory holds any element type, so every dtype is supported except
// the sub-byte quantized ones, which quantized openreg tensors refuse as
// CUDA's quantized kernels do (aten/QuantizedTensors.h).
DeviceCapability OpenRegGuardImpl::getDeviceCapability(Device /*device*/) const {
  DeviceCapability capability;
  auto& types = capability.capability_data.supported_scalar_types;
  types.has_QUInt4x2 = false;
  types.has_QUInt2x4 = false;
  return capability;
}

DeviceIndex OpenRegGuardImpl::deviceCount() const noexcept {
  return device_count_ensure_non_throwing();
}

bool OpenRegGuardImpl::queryStream(const Stream& stream) const {
  return OpenRegStream(stream).query();
}

void OpenRegGuardImpl::synchronizeStream(const Stream& stream) const {
  on_synchronizing_call("stream synchronize");
  OpenRegStream(stream).synchronize();
}

void OpenRegGuardImpl::synchronizeDevice(const DeviceIndex device_index) const {
  on_synchronizing_call("device synchronize");
  synchronize_device(device_index);
}

void OpenRegGuardImpl::record(
    void** event, const Stream& stream, const DeviceIndex device_index, const EventFlag flag) const {
  record_event(event, stream, device_index, flag);
}

void OpenRegGuardImpl::block(void* event, const Stream& stream) const {
  block_on_event(event, stream);
}

bool OpenRegGuardImpl::queryEvent(void* event) const {
  return query_event(event);
}

void OpenRegGuardImpl::synchronizeEvent(void* event) const {
  synchronize_event(event);
}

double OpenRegGuardImpl::elapsedTime(void* start, void* end, const DeviceIndex /*device_index*/) const {
  return event_elapsed_time(start, end);
}

void OpenRegGuardImpl::destroyEvent(void* event, const DeviceIndex /*device_index*/) const noexcept {
  destroy_event(event);
}

void OpenRegGuardImpl::recordDataPtrOnStream(const c10::DataPtr& data_ptr, const Stream& stream) const {
  getDeviceAllocator()->recordStream(data_ptr, stream);
}

namespace {
C10_REGISTER_GUARD_IMPL(PrivateUse1, OpenRegGuardImpl);
}  // namespace
}  // namespace c10::openreg::impl
