#pragma once

#include <atomic>

#include <c10/macros/Macros.h>

// torch.openreg.set_sync_debug_mode: warn about, or refuse, the calls that make
// the host wait for the device on a real accelerator, as CUDA's sync debug
// mode does: reading device memory into host memory (item(), .cpu(), a
// synchronous copy to the CPU), operators whose result size depends on the
// device's data (nonzero, masked_select, unique, ...), and explicit
// synchronization (torch.openreg.synchronize, Stream.synchronize). openreg's
// host-executed operators also wait for their stream's queued work, but
// that is how a simulated device runs, not a synchronization a program asked
// for, so it never reports.
namespace c10::openreg {

enum class SyncDebugMode { Disabled = 0, Warn = 1, Error = 2 };

void set_sync_debug_mode(SyncDebugMode mode);
SyncDebugMode get_sync_debug_mode();

namespace detail {
extern std::atomic<int> g_sync_debug_mode;
void report_sync(const char* what);
}  // namespace detail

inline bool sync_debug_enabled() {
  return C10_UNLIKELY(detail::g_sync_debug_mode.load(std::memory_order_relaxed) != 0);
}

// Warns (mode warn) or raises (mode error) naming `what`; one relaxed load
// while the mode is off.
inline void warn_or_error_on_sync(const char* what) {
  if (sync_debug_enabled()) {
    detail::report_sync(what);
  }
}

}  // namespace c10::openreg
