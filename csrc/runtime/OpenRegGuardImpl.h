#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

// The device guard implementation: how PyTorch switches the current openreg
// device and stream (c10::DeviceGuard, StreamGuard, torch.accelerator.*,
// torch.Stream, torch.Event), and how it records, waits on and times events.
//
// Declared in a header, as c10/cuda/impl/CUDAGuardImpl.h is, so that the
// typed guards (OpenRegGuard.h) call the device and stream methods without a
// virtual call; the registration for generic code is in OpenRegGuardImpl.cpp.
namespace c10::openreg::impl {

struct OpenRegGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr DeviceType static_type = DeviceType::PrivateUse1;

  OpenRegGuardImpl() = default;
  explicit OpenRegGuardImpl(DeviceType type) {
    TORCH_CHECK(type == static_type, "openreg guard got a ", type, " device type");
  }

  DeviceType type() const override {
    return static_type;
  }

  Device exchangeDevice(Device device) const override {
    TORCH_CHECK(device.type() == static_type, "openreg guard got a ", device, " device");
    return make_device(exchange_device(device.index()));
  }

  Device getDevice() const override {
    return make_device(current_device());
  }

  void setDevice(Device device) const override {
    TORCH_CHECK(device.type() == static_type, "openreg guard got a ", device, " device");
    set_device(device.index());
  }

  void uncheckedSetDevice(Device device) const noexcept override {
    // Restoring a device that was current before cannot fail; ignore errors
    // rather than throw from a destructor.
    (void)orSetDevice(device.index());
  }

  Stream getStream(Device device) const override {
    return getCurrentOpenRegStream(device.index());
  }

  Stream exchangeStream(Stream stream) const override {
    const OpenRegStream previous = getCurrentOpenRegStream(stream.device_index());
    setCurrentOpenRegStream(OpenRegStream(stream));
    return previous;
  }

  Stream getDefaultStream(Device device) const override;
  Stream getNewStream(Device device, int priority) const override;
  Stream getStreamFromGlobalPool(Device device, bool isHighPriority) const override;
  void* getStreamNativeHandle(Stream stream) const override;
  DeviceCapability getDeviceCapability(Device device) const override;
  DeviceIndex deviceCount() const noexcept override;
  bool queryStream(const Stream& stream) const override;
  void synchronizeStream(const Stream& stream) const override;
  void synchronizeDevice(DeviceIndex device_index) const override;
  void record(void** event, const Stream& stream, DeviceIndex device_index, EventFlag flag) const override;
  void block(void* event, const Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void synchronizeEvent(void* event) const override;
  double elapsedTime(void* start, void* end, DeviceIndex device_index) const override;
  void destroyEvent(void* event, DeviceIndex device_index) const noexcept override;
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const Stream& stream) const override;
};

}  // namespace c10::openreg::impl
