#pragma once

#include "runtime/OpenRegCaptureRules.h"
#include "runtime/OpenRegSyncDebug.h"

namespace c10::openreg {

// A call that makes the host wait for the device (item(), a synchronous copy
// to the host, an operator whose result size depends on device data, an
// explicit synchronization): refused while a graph capture forbids it, as
// CUDA's capture refuses it, and reported by sync debug mode. Two relaxed
// loads when neither is on.
inline void on_synchronizing_call(const char* what) {
  check_capture_allows(what);
  warn_or_error_on_sync(what);
}

}  // namespace c10::openreg
