// The PrivateUse1 hooks: what generic PyTorch code asks of "the accelerator"
// (availability, current device, pinned memory, pointers' devices, lazy init).
// PyTorch's defaults throw or answer 0 devices, so every method that a generic
// path reaches is overridden, and none throws for a valid device.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>
#include <c10/core/StorageImpl.h>

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGenerator.h"
#include "runtime/OpenRegHostAllocator.h"
#include "runtime/OpenRegStorage.h"
#include "runtime/Options.h"

namespace c10::openreg {
namespace {

struct OpenRegHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    return device_count_ensure_non_throwing() > 0;
  }

  void init() const override {
    // Validates the OPENREG_* environment; device arenas are created lazily.
    validate_options();
  }

  bool hasPrimaryContext(DeviceIndex device_index) const override {
    return is_device_initialized(device_index);
  }

  DeviceIndex deviceCount() const override {
    return device_count_ensure_non_throwing();
  }

  void setCurrentDevice(DeviceIndex device) const override {
    set_device(device);
  }

  DeviceIndex getCurrentDevice() const override {
    return current_device();
  }

  DeviceIndex exchangeDevice(DeviceIndex device) const override {
    return exchange_device(device);
  }

  DeviceIndex maybeExchangeDevice(DeviceIndex device) const override {
    return maybe_exchange_device(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    orPointerAttributes attributes{};
    OPENREG_CHECK(orPointerGetAttributes(&attributes, data));
    TORCH_CHECK(
        attributes.type == orMemoryTypeDevice, "getDeviceFromPtr: pointer ", data, " is not openreg device memory");
    return make_device(static_cast<DeviceIndex>(attributes.device));
  }

  bool isPinnedPtr(const void* data) const override {
    orPointerAttributes attributes{};
    return orPointerGetAttributes(&attributes, data) == orSuccess && attributes.type == orMemoryTypeHost;
  }

  const at::Generator& getDefaultGenerator(DeviceIndex device_index) const override {
    return c10::openreg::getDefaultGenerator(device_index);
  }

  at::Generator getNewGenerator(DeviceIndex device_index) const override {
    return createGenerator(device_index);
  }

  c10::Allocator* getPinnedMemoryAllocator() const override {
    return getHostAllocator();
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

// Registered when the extension is loaded, before any Python code runs.
const bool g_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new OpenRegHooks());
  return true;
}();

}  // namespace
}  // namespace c10::openreg
