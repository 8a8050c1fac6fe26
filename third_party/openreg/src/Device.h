// Per-device state shared by the memory, copy and device entry points.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

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

  // What holds the allocation live, in one word so that orFree can take it
  // from "unused" to "released" with one compare-exchange: open
  // orMemAccessBegin scopes (low 32 bits), orMemcpyAsync copies queued on
  // some stream that touch it (the next 31), and the released flag (the top
  // bit). A reader that found the allocation without a lock adds its use
  // with one atomic add and learns from the old value whether orFree had
  // released it first; otherwise orFree's exchange, which needs the word at
  // 0, fails and sees the use. Either the use fails or orFree does.
  static constexpr uint64_t kQueuedCopy = uint64_t{1} << 32;
  static constexpr uint64_t kReleased = uint64_t{1} << 63;
  static uint32_t openAccesses(uint64_t uses) {
    return static_cast<uint32_t>(uses);
  }
  // False if orFree (or orIpcCloseMemHandle) released it first; the added
  // uses of a released allocation are never looked at again.
  bool addUses(uint64_t added) {
    return (uses.fetch_add(added, std::memory_order_relaxed) & kReleased) == 0;
  }

  // With the device's mutex held: marks it released and returns 0 if nothing
  // uses it, else returns its uses, unchanged. Acquire: pairs with the release
  // of the last access's end and queued copy's completion.
  uint64_t release() {
    uint64_t unused = 0;
    return uses.compare_exchange_strong(unused, kReleased, std::memory_order_acquire) ? 0 : unused;
  }

  const size_t size;  // page-rounded
  // Host view address minus user view address (mod 2^64): the arena's for
  // orMalloc memory, the import's own for memory opened from an IPC handle.
  const uintptr_t hostDelta;
  // Opened with orIpcOpenMemHandle (released with orIpcCloseMemHandle).
  const bool imported;
  std::atomic<uint64_t> uses{0};
};

// The live allocations of a device, imported ranges included, sorted by user
// base address. Immutable once published: writers publish a new table and
// reclaim the old one after waitForReaders() (ReadSection.h).
struct AllocationTable {
  struct Entry {
    uintptr_t base;
    Allocation* allocation;
  };
  // The first entry whose base is above address.
  std::vector<Entry>::const_iterator after(uintptr_t address) const {
    return std::upper_bound(entries.begin(), entries.end(), address, [](uintptr_t value, const Entry& entry) {
      return value < entry.base;
    });
  }
  std::vector<Entry> entries;
};

struct Device {
  int index = 0;
  // Serializes the writers: malloc, free, IPC open and close, arena creation.
  // Lookups, scoped accesses and copies take no lock (DeviceMemory.h).
  std::mutex mutex;
  // Created at the first allocation and never destroyed, so it is read
  // without the mutex to map addresses to devices.
  std::atomic<Arena*> arena{nullptr};
  // Null while the device has no allocation; read inside a ReadSection.
  std::atomic<const AllocationTable*> allocations{nullptr};
  // Replaced tables that readers may still hold, deleted after the next
  // waitForReaders(); guarded by mutex.
  std::vector<const AllocationTable*> retired;
};

// Valid for 0 <= index < config.deviceCount. Inline: every memory and copy
// entry point maps pointers to devices through it.
inline Device& device(int index) {
  // Leaked on purpose, like the configuration: it must outlive static
  // destruction. Sized for the maximum so it needs no configuration.
  static Device* const devices = [] {
    Device* all = new Device[kMaxDevices];
    for (int i = 0; i < kMaxDevices; ++i)
      all[i].index = i;
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
    if (arena != nullptr && arena->contains(address))
      return &candidate;
  }
  return anyImports() ? deviceOfImport(address) : nullptr;
}

// True if [address, address + bytes) intersects any arena's user view or
// imported range.
inline bool overlapsDeviceMemory(const Config& config, uintptr_t address, size_t bytes) {
  for (int i = 0; i < config.deviceCount; ++i) {
    const Arena* arena = device(i).arena.load(std::memory_order_acquire);
    if (arena != nullptr && arena->overlaps(address, bytes))
      return true;
  }
  return anyImports() && overlapsImport(address, bytes);
}

// The calling thread's current device.
int currentDevice();

}  // namespace openreg::runtime
