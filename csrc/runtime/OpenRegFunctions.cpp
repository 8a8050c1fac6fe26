#include "runtime/OpenRegFunctions.h"

#include "sanitizer/SanitizerTrace.h"

namespace c10::openreg {

c10::DeviceIndex device_count() {
  int count = 0;
  OPENREG_CHECK(orGetDeviceCount(&count));
  return static_cast<c10::DeviceIndex>(count);
}

c10::DeviceIndex device_count_ensure_non_throwing() noexcept {
  int count = 0;
  return orGetDeviceCount(&count) == orSuccess ? static_cast<c10::DeviceIndex>(count) : 0;
}

namespace {

// Out of line, so the check's fast path stays a compare and a branch.
[[noreturn]] C10_NOINLINE void throw_invalid_device_index(c10::DeviceIndex index, c10::DeviceIndex count) {
  TORCH_CHECK(
      false, "Invalid openreg device index ", static_cast<int>(index), ": there ",
      count == 1 ? "is 1 openreg device" : "are " + std::to_string(count) + " openreg devices",
      " (set OPENREG_DEVICE_COUNT to change it), so valid indices are 0..", count - 1, ".");
}

}  // namespace

void check_device_index(c10::DeviceIndex index) {
  // Runs several times per operator call; the count cannot change (the
  // runtime reads its environment once), so it is asked once. A failure
  // (an invalid environment) throws and is asked again next time.
  static const c10::DeviceIndex count = device_count();
  if (C10_UNLIKELY(index < 0 || index >= count)) {
    throw_invalid_device_index(index, count);
  }
}

void set_device(c10::DeviceIndex index) {
  check_device_index(index);
  OPENREG_CHECK(orSetDevice(index));
}

c10::DeviceIndex maybe_exchange_device(c10::DeviceIndex index) {
  return index < 0 ? current_device() : exchange_device(index);
}

bool is_device_initialized(c10::DeviceIndex index) {
  check_device_index(index);
  int initialized = 0;
  OPENREG_CHECK(orDeviceIsInitialized(index, &initialized));
  return initialized != 0;
}

void synchronize_device(c10::DeviceIndex index) {
  const auto previous = exchange_device(index);
  const orError_t err = orDeviceSynchronize();
  set_device(previous);
  OPENREG_CHECK(err);
  sanitizer::trace([](const auto& t) { t.trace_gpu_device_synchronization(c10::kPrivateUse1); });
}

}  // namespace c10::openreg
