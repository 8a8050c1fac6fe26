#include "Device.h"

#include "Error.h"
#include "Stream.h"

namespace openreg::runtime {

namespace {

// Initial-exec: read by every guard and kernel launch, so it is one
// fs-relative load, not a __tls_get_addr call, even in a dlopen'ed library.
// That puts the library's whole thread-local block (144 bytes) in the static
// TLS that glibc reserves for libraries loaded later (512 bytes by default),
// so the runtime's thread-locals must stay small; only this and
// ReadSection's slot, the hot ones, use the model.
[[gnu::tls_model("initial-exec")]] thread_local int current = 0;

orError_t checkDevice(const Config& config, int index) {
  if (index < 0 || index >= config.deviceCount) {
    return fail(
        orErrorInvalidDevice, "invalid device %d: the device count is %d (valid: 0..%d)", index, config.deviceCount,
        config.deviceCount - 1);
  }
  return orSuccess;
}

}  // namespace

int currentDevice() {
  return current;
}

}  // namespace openreg::runtime

using namespace openreg::runtime;

orError_t orGetDeviceCount(int* count) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (count == nullptr)
    return fail(orErrorInvalidValue, "orGetDeviceCount: count is NULL");
  *count = config->deviceCount;
  return orSuccess;
}

orError_t orSetDevice(int index) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (const orError_t error = checkDevice(*config, index); error != orSuccess)
    return error;
  current = index;
  return orSuccess;
}

orError_t orGetDevice(int* index) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (index == nullptr)
    return fail(orErrorInvalidValue, "orGetDevice: device is NULL");
  *index = current;
  return orSuccess;
}

orError_t orDeviceSynchronize(void) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  return synchronizeDevice(current, "orDeviceSynchronize");
}

orError_t orDeviceIsInitialized(int index, int* initialized) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (const orError_t error = checkDevice(*config, index); error != orSuccess)
    return error;
  if (initialized == nullptr) {
    return fail(orErrorInvalidValue, "orDeviceIsInitialized: initialized is NULL");
  }
  *initialized = device(index).arena.load(std::memory_order_acquire) != nullptr;
  return orSuccess;
}
