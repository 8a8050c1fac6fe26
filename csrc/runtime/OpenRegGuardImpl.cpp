// The device guard: how PyTorch switches the current openreg device
// (c10::DeviceGuard, torch.accelerator.*_device_index, device_index context).
//
// openreg runs every operation synchronously on the calling thread, so each
// device has exactly one stream, the default one, and it is always idle once
// an operation has returned.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"

namespace c10::openreg {
namespace {

struct OpenRegGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr DeviceType static_type = DeviceType::PrivateUse1;

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
    return Stream(Stream::DEFAULT, device);
  }

  Stream getDefaultStream(Device device) const override {
    return Stream(Stream::DEFAULT, device);
  }

  Stream getNewStream(Device device, int /*priority*/) const override {
    return Stream(Stream::DEFAULT, device);
  }

  Stream getStreamFromGlobalPool(Device device, bool /*isHighPriority*/) const override {
    return Stream(Stream::DEFAULT, device);
  }

  Stream exchangeStream(Stream stream) const override {
    return Stream(Stream::DEFAULT, stream.device());
  }

  DeviceIndex deviceCount() const noexcept override {
    return device_count_ensure_non_throwing();
  }

  bool queryStream(const Stream& /*stream*/) const override {
    return true;
  }

  void synchronizeStream(const Stream& stream) const override {
    synchronize_device(stream.device_index());
  }

  void synchronizeDevice(const DeviceIndex device_index) const override {
    synchronize_device(device_index);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, OpenRegGuardImpl);

} // namespace
} // namespace c10::openreg
