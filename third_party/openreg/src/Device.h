// Per-device state shared by the memory, copy and device entry points.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>

#include "Arena.h"
#include "Environment.h"

namespace openreg::runtime {

struct Allocation {
  explicit Allocation(size_t bytes) : size(bytes) {}
  const size_t size;  // page-rounded
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
  std::map<uintptr_t, Allocation> allocations;  // by user base address; guarded by mutex
};

// Valid for 0 <= index < config.deviceCount.
Device& device(int index);

// The device whose arena user view contains address, or null.
inline Device* deviceContaining(const Config& config, uintptr_t address) {
  for (int i = 0; i < config.deviceCount; ++i) {
    Device& candidate = device(i);
    const Arena* arena = candidate.arena.load(std::memory_order_acquire);
    if (arena != nullptr && arena->contains(address)) return &candidate;
  }
  return nullptr;
}

// True if [address, address + bytes) intersects any arena's user view.
inline bool overlapsDeviceMemory(const Config& config, uintptr_t address, size_t bytes) {
  for (int i = 0; i < config.deviceCount; ++i) {
    const Arena* arena = device(i).arena.load(std::memory_order_acquire);
    if (arena != nullptr && arena->overlaps(address, bytes)) return true;
  }
  return false;
}

// The calling thread's current device.
int currentDevice();

}  // namespace openreg::runtime
