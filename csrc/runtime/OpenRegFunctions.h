#pragma once

#include <c10/core/Device.h>
#include <openreg.h>

#include "runtime/OpenRegException.h"

// Device management for the PyTorch side, over the runtime's C API. Every
// function that takes an index validates it and throws a clear error.
namespace c10::openreg {

// Throws if the OPENREG_* environment is invalid.
c10::DeviceIndex device_count();
// Never throws: 0 if the runtime cannot start (the reason is raised by
// device_count()).
c10::DeviceIndex device_count_ensure_non_throwing() noexcept;

void check_device_index(c10::DeviceIndex index);
void set_device(c10::DeviceIndex index);

// Inline, as the two below: every guard, allocation and kernel launch asks,
// and the runtime's answer is a few instructions.
inline c10::DeviceIndex current_device() {
  int device = 0;
  OPENREG_CHECK(orGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

// Sets `index` as current and returns the previous current device.
inline c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  const c10::DeviceIndex previous = current_device();
  if (index != previous) {
    set_device(index);
  }
  return previous;
}

// Same as exchange_device, but never fails for an index -1 ("no change").
c10::DeviceIndex maybe_exchange_device(c10::DeviceIndex index);
bool is_device_initialized(c10::DeviceIndex index);
void synchronize_device(c10::DeviceIndex index);

inline c10::Device make_device(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

}  // namespace c10::openreg
