// The device guard: how PyTorch switches the current openreg device and
// stream (c10::DeviceGuard, StreamGuard, torch.accelerator.*, torch.Stream,
// torch.Event), and how it records, waits on and times events.
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "runtime/OpenRegDeviceAllocator.h"
#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

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
    return getCurrentOpenRegStream(device.index());
  }

  Stream getDefaultStream(Device device) const override {
    return getDefaultOpenRegStream(device.index());
  }

  Stream getNewStream(Device device, int priority) const override {
    return getStreamFromPool(priority, device.index());
  }

  Stream getStreamFromGlobalPool(Device device, bool isHighPriority) const override {
    return getStreamFromPool(isHighPriority, device.index());
  }

  Stream exchangeStream(Stream stream) const override {
    const OpenRegStream previous = getCurrentOpenRegStream(stream.device_index());
    setCurrentOpenRegStream(OpenRegStream(stream));
    return previous;
  }

  void* getStreamNativeHandle(const Stream stream) const override {
    return OpenRegStream(stream).handle();
  }

  // Device memory holds any element type, so every dtype is supported except
  // the quantized ones, which need a QuantizedPrivateUse1 backend.
  DeviceCapability getDeviceCapability(Device /*device*/) const override {
    DeviceCapability capability;
    auto& types = capability.capability_data.supported_scalar_types;
    types.has_QInt8 = false;
    types.has_QUInt8 = false;
    types.has_QInt32 = false;
    types.has_QUInt4x2 = false;
    types.has_QUInt2x4 = false;
    return capability;
  }

  DeviceIndex deviceCount() const noexcept override {
    return device_count_ensure_non_throwing();
  }

  bool queryStream(const Stream& stream) const override {
    return OpenRegStream(stream).query();
  }

  void synchronizeStream(const Stream& stream) const override {
    OpenRegStream(stream).synchronize();
  }

  void synchronizeDevice(const DeviceIndex device_index) const override {
    synchronize_device(device_index);
  }

  // Events are created at their first record, on the recording stream's
  // device. PyTorch's default flag disables timing, as in CUDA.
  void record(void** event, const Stream& stream, const DeviceIndex device_index, const EventFlag flag)
      const override {
    TORCH_CHECK(
        device_index == -1 || device_index == stream.device_index(),
        "Event device index ",
        static_cast<int>(device_index),
        " does not match recording stream's device index ",
        static_cast<int>(stream.device_index()),
        ".");
    const OpenRegStream openreg_stream(stream);
    c10::DeviceGuard guard(stream.device());
    auto or_event = static_cast<orEvent_t>(*event);
    if (or_event == nullptr) {
      const unsigned flags = flag == EventFlag::BACKEND_DEFAULT ? orEventDefault : orEventDisableTiming;
      OPENREG_CHECK(orEventCreateWithFlags(&or_event, flags));
      *event = or_event;
    }
    OPENREG_CHECK(orEventRecord(or_event, openreg_stream.handle()));
  }

  void block(void* event, const Stream& stream) const override {
    if (event == nullptr) {
      return;  // never recorded: nothing to wait for
    }
    const OpenRegStream openreg_stream(stream);
    c10::DeviceGuard guard(stream.device());
    OPENREG_CHECK(orStreamWaitEvent(openreg_stream.handle(), static_cast<orEvent_t>(event), 0));
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) {
      return true;
    }
    const orError_t err = orEventQuery(static_cast<orEvent_t>(event));
    if (err == orErrorNotReady) {
      return false;
    }
    OPENREG_CHECK(err);
    return true;
  }

  void synchronizeEvent(void* event) const override {
    if (event != nullptr) {
      OPENREG_CHECK(orEventSynchronize(static_cast<orEvent_t>(event)));
    }
  }

  double elapsedTime(void* start, void* end, const DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(
        start != nullptr && end != nullptr,
        "Both events must be recorded before calculating elapsed time.");
    float ms = 0;
    const orError_t err =
        orEventElapsedTime(&ms, static_cast<orEvent_t>(start), static_cast<orEvent_t>(end));
    TORCH_CHECK(err != orErrorNotReady, "Both events must be completed before calculating elapsed time.");
    // c10::Event has checked timing flags and recording; what the runtime
    // still refuses (events of two devices, whose clocks are unrelated, as
    // CUDA refuses them) its message names.
    TORCH_CHECK(err == orSuccess, "openreg Event.elapsed_time: ", orGetLastErrorMessage());
    return ms;
  }

  void destroyEvent(void* event, const DeviceIndex /*device_index*/) const noexcept override {
    if (event != nullptr) {
      (void)orEventDestroy(static_cast<orEvent_t>(event));
    }
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const Stream& stream) const override {
    getDeviceAllocator()->recordStream(data_ptr, stream);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, OpenRegGuardImpl);

} // namespace
} // namespace c10::openreg
