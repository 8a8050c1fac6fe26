// Per-device state shared by the memory, copy and device entry points.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>

#include "Arena.h"
#include "Environment.h"
#include "Ipc.h"

namespace openreg::runtime {

struct Allocation {
  Allocation(size_t bytes, uintptr_t hostDelta, bool imported = false)
      : size(bytes), hostDelta(hostDelta), imported(imported) {}
  // The host-view address of a user address inside the allocation.
  void* hostAddress(uintptr_t userAddress) const {
    return reinterpret_cast<void*>(userAddress + hostDelta);
  }
  const size_t size;  // page-rounded
  // Host view address minus user view address (mod 2^64): the arena's for
  // orMalloc memory, the import's own for memory opened from an IPC handle.
  const uintptr_t hostDelta;
  // Opened with orIpcOpenMemHandle (released with orIpcCloseMemHandle).
  const bool imported;
  // Open orMemAccessBegin scopes. Changed under the shared lock, so orFree
  // (exclusive lock) sees a stable value.
  std::atomic<uint32_t> openAccesses{0};
  // orMemcpyAsync copies queued on some stream that touch it. Raised under the
  // shared lock, lowered by the stream's worker once the copy has run; orFree
  // frees only at 0.
  std::atomic<uint32_t> queuedCopies{0};
};

struct Device {
  int index = 0;
  // Shared for lookups, scoped accesses and copies; exclusive for malloc,
  // free and arena creation.
  std::shared_mutex mutex;
  // Created at the first allocation and never destroyed, so it is read
  // without the mutex to map addresses to devices.
  std::atomic<Arena*> arena{nullptr};
  // By user base address, imported ranges included; guarded by mutex.
  std::map<uintptr_t, Allocation> allocations;
};

// Valid for 0 <= index < config.deviceCount. Inline: every memory and copy
// entry point maps pointers to devices through it.
inline Device& device(int index) {
  // Leaked on purpose, like the configuration: it must outlive static
  // destruction. Sized for the maximum so it needs no configuration.
  static Device* const devices = [] {
    Device* all = new Device[kMaxDevices];
    for (int i = 0; i < kMaxDevices; ++i) all[i].index = i;
    return all;
  }();
  return devices[index];
}

// The device whose arena user view, or one of whose imported ranges,
// contains address, or null.
inline Device* deviceContaining(const Config& config, uintptr_t address) {
  for (int i = 0; i < config.deviceCount; ++i) {
    Device& candidate = device(i);
    const Arena* arena = candidate.arena.load(std::memory_order_acquire);
    if (arena != nullptr && arena->contains(address)) return &candidate;
  }
  return anyImports() ? deviceOfImport(address) : nullptr;
}

// True if [address, address + bytes) intersects any arena's user view or
// imported range.
inline bool overlapsDeviceMemory(const Config& config, uintptr_t address, size_t bytes) {
  for (int i = 0; i < config.deviceCount; ++i) {
    const Arena* arena = device(i).arena.load(std::memory_order_acquire);
    if (arena != nullptr && arena->overlaps(address, bytes)) return true;
  }
  return anyImports() && overlapsImport(address, bytes);
}

// The calling thread's current device.
int currentDevice();

}  // namespace openreg::runtime
