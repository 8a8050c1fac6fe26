#include "runtime/OpenRegSyncDebug.h"

#include <c10/util/Exception.h>

namespace c10::openreg {

namespace detail {

std::atomic<int> g_sync_debug_mode{0};

void report_sync(const char* what) {
  if (get_sync_debug_mode() == SyncDebugMode::Error) {
    TORCH_CHECK(false, "called a synchronizing openreg operation: ", what);
  }
  TORCH_WARN("called a synchronizing openreg operation: ", what);
}

}  // namespace detail

void set_sync_debug_mode(SyncDebugMode mode) {
  detail::g_sync_debug_mode.store(static_cast<int>(mode), std::memory_order_relaxed);
}

SyncDebugMode get_sync_debug_mode() {
  return static_cast<SyncDebugMode>(detail::g_sync_debug_mode.load(std::memory_order_relaxed));
}

}  // namespace c10::openreg
