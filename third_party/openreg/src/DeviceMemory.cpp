#include "DeviceMemory.h"

#include <iterator>
#include <mutex>
#include <optional>
#include <string>

#include "Error.h"
#include "HostMemory.h"
#include "Stream.h"

namespace openreg::runtime {

Allocation* findAllocation(Device& device, uintptr_t address, size_t bytes, const char* context,
                           const char* role, uintptr_t* base) {
  if (Allocation* allocation = lookupAllocation(device, address, bytes, base)) return allocation;
  const auto next = device.allocations.upper_bound(address);
  if (next == device.allocations.begin() ||
      address - std::prev(next)->first >= std::prev(next)->second.size) {
    fail(orErrorInvalidDevicePointer, "%s: the %s %p is not inside a live allocation of device %d",
         context, role, reinterpret_cast<void*>(address), device.index);
    return nullptr;
  }
  const auto& [start, allocation] = *std::prev(next);
  fail(orErrorInvalidDevicePointer,
       "%s: the %s range [%p, +%zu bytes) exceeds its allocation [%p, %p) of device %d", context,
       role, reinterpret_cast<void*>(address), bytes, reinterpret_cast<void*>(start),
       reinterpret_cast<void*>(start + allocation.size), device.index);
  return nullptr;
}

}  // namespace openreg::runtime

using namespace openreg::runtime;

namespace {

orError_t notDevicePointer(const char* context, uintptr_t address) {
  return fail(orErrorInvalidDevicePointer, "%s: %p is not a device pointer", context,
              reinterpret_cast<void*>(address));
}

// Scoped accesses, alone (orMemAccessBegin/End) or batched: the pointers
// and how messages name them ("pointer" alone, "devPtrs[i]" in a batch).
struct Accesses {
  const char* api;
  bool batch;
  size_t count;
  const void* const* devPtrs;

  uintptr_t address(size_t i) const { return reinterpret_cast<uintptr_t>(devPtrs[i]); }
  std::string role(size_t i) const {
    return batch ? "devPtrs[" + std::to_string(i) + "]" : std::string("pointer");
  }

  // The one device all pointers belong to, found without a lock.
  orError_t findDevice(const Config& config, Device** found) const {
    Device* dev = nullptr;
    for (size_t i = 0; i < count; ++i) {
      // Most pointers of a batch lie in the first one's arena.
      const Arena* arena = dev != nullptr ? dev->arena.load(std::memory_order_acquire) : nullptr;
      if (arena != nullptr && arena->contains(address(i))) continue;
      Device* owner = deviceContaining(config, address(i));
      if (owner == nullptr) {
        return fail(orErrorInvalidDevicePointer, "%s: %s%p is not a device pointer", api,
                    batch ? (role(i) + " ").c_str() : "", devPtrs[i]);
      }
      if (dev != nullptr && owner != dev) {
        return fail(orErrorInvalidValue,
                    "%s: devPtrs[%zu] %p is memory of device %d, devPtrs[0] %p of device %d: one "
                    "batch reaches one device",
                    api, i, devPtrs[i], owner->index, devPtrs[0], dev->index);
      }
      dev = owner;
    }
    *found = dev;
    return orSuccess;
  }

  // With dev.mutex held: the allocation holding [address(i), +bytes),
  // trying the previous pointer's first (a call's arguments often share one)
  // before the table. Records a message naming pointer i if there is none.
  Allocation* find(Device& dev, size_t i, size_t bytes, Allocation* previous,
                   uintptr_t* base) const {
    const uintptr_t offset = address(i) - *base;
    if (previous != nullptr && offset < previous->size && bytes <= previous->size - offset) {
      return previous;
    }
    if (Allocation* allocation = lookupAllocation(dev, address(i), bytes, base)) return allocation;
    return findAllocation(dev, address(i), bytes, api, role(i).c_str(), base);
  }

  // With dev.mutex held, after an error at pointer n: undoes what the first
  // n pointers did to their allocations' counts (delta -1 after begins, +1
  // after ends). No allocation can have been freed meanwhile: the lock is held.
  void undo(Device& dev, size_t n, int delta) const {
    uintptr_t base;
    for (size_t i = 0; i < n; ++i) {
      lookupAllocation(dev, address(i), 0, &base)->openAccesses.fetch_add(
          static_cast<uint32_t>(delta), std::memory_order_relaxed);
    }
  }
};

orError_t beginAccesses(const char* api, bool batch, size_t count, const void* const* devPtrs,
                        const size_t* sizes, void** hostPtrs) {
  const Config* config = runtimeConfig();
  if (config == nullptr) return orErrorInitializationError;
  if (count == 0) return orSuccess;
  if (devPtrs == nullptr || sizes == nullptr || hostPtrs == nullptr) {
    return fail(orErrorInvalidValue, "%s: %s is NULL (count %zu)", api,
                batch ? "devPtrs, sizes or hostPtrs" : "hostPtr", count);
  }
  const Accesses accesses{api, batch, count, devPtrs};
  Device* dev;
  if (const orError_t error = accesses.findDevice(*config, &dev); error != orSuccess) return error;
  std::shared_lock lock(dev->mutex);
  // Consecutive pointers into one allocation are counted with one atomic
  // update (locked instructions cost tens of instructions' time each).
  Allocation* allocation = nullptr;
  uint32_t pending = 0;
  uintptr_t base = 0;
  for (size_t i = 0; i < count; ++i) {
    Allocation* const previous = allocation;
    allocation = accesses.find(*dev, i, sizes[i], previous, &base);
    if (allocation != previous && pending != 0) {
      previous->openAccesses.fetch_add(pending, std::memory_order_relaxed);
      pending = 0;
    }
    if (allocation == nullptr) {
      accesses.undo(*dev, i, -1);
      return orErrorInvalidDevicePointer;
    }
    ++pending;
    hostPtrs[i] = allocation->hostAddress(accesses.address(i));
  }
  allocation->openAccesses.fetch_add(pending, std::memory_order_relaxed);
  return orSuccess;
}

orError_t endAccesses(const char* api, bool batch, size_t count, const void* const* devPtrs) {
  const Config* config = runtimeConfig();
  if (config == nullptr) return orErrorInitializationError;
  if (count == 0) return orSuccess;
  if (devPtrs == nullptr) return fail(orErrorInvalidValue, "%s: devPtrs is NULL (count %zu)", api, count);
  const Accesses accesses{api, batch, count, devPtrs};
  Device* dev;
  if (const orError_t error = accesses.findDevice(*config, &dev); error != orSuccess) return error;
  std::shared_lock lock(dev->mutex);
  // As in beginAccesses: one atomic update per run of pointers into one
  // allocation, the run starting at pointer `first`.
  Allocation* allocation = nullptr;
  size_t first = 0;
  uintptr_t base = 0;
  for (size_t i = 0; i <= count; ++i) {
    Allocation* const previous = allocation;
    const uintptr_t previousBase = base;
    if (i < count) allocation = accesses.find(*dev, i, 0, previous, &base);
    if (previous != nullptr && (allocation != previous || i == count)) {
      const uint32_t run = static_cast<uint32_t>(i - first);
      // Other threads may end their own accesses concurrently: never go below 0.
      uint32_t open = previous->openAccesses.load(std::memory_order_relaxed);
      do {
        if (open < run) {
          accesses.undo(*dev, first, +1);
          const size_t failing = first + open;
          return fail(orErrorIllegalState,
                      "%s: allocation %p (%zu bytes) of device %d has no open host access for "
                      "%s%p",
                      api, reinterpret_cast<void*>(previousBase), previous->size, dev->index,
                      batch ? (accesses.role(failing) + " ").c_str() : "", devPtrs[failing]);
        }
      } while (!previous->openAccesses.compare_exchange_weak(open, open - run,
                                                             std::memory_order_relaxed));
      first = i;
    }
    if (i < count && allocation == nullptr) {
      accesses.undo(*dev, first, +1);
      return orErrorInvalidDevicePointer;
    }
  }
  return orSuccess;
}

}  // namespace

orError_t orMalloc(void** devPtr, size_t size) {
  const Config* config = runtimeConfig();
  if (config == nullptr) return orErrorInitializationError;
  if (devPtr == nullptr) return fail(orErrorInvalidValue, "orMalloc: devPtr is NULL");
  if (size == 0) {
    *devPtr = nullptr;
    return orSuccess;
  }
  Device& dev = device(currentDevice());
  std::unique_lock lock(dev.mutex);
  Arena* arena = dev.arena.load(std::memory_order_relaxed);
  // Requests beyond the capacity fail without creating the arena (and before
  // rounding, which could overflow).
  if (size <= config->deviceMemory) {
    if (arena == nullptr) {
      std::string error;
      arena = Arena::create(dev.index, config->deviceMemory, config->memoryProtection, &error);
      if (arena == nullptr) return fail(orErrorMemoryAllocation, "%s", error.c_str());
      dev.arena.store(arena, std::memory_order_release);
    }
    const size_t bytes = config->roundUpToPage(size);
    if (const std::optional<uintptr_t> address = arena->allocate(bytes)) {
      dev.allocations.try_emplace(*address, bytes, arena->hostDelta());
      *devPtr = reinterpret_cast<void*>(*address);
      return orSuccess;
    }
  }
  const size_t freeBytes = arena != nullptr ? arena->freeBytes() : config->deviceMemory;
  const size_t largest = arena != nullptr ? arena->largestFreeRange() : config->deviceMemory;
  return fail(orErrorMemoryAllocation,
              "out of memory on device %d: requested %zu bytes; capacity %zu bytes, %zu bytes in "
              "use, %zu bytes free, largest free range %zu bytes",
              dev.index, size, config->deviceMemory, config->deviceMemory - freeBytes, freeBytes,
              largest);
}

orError_t orFree(void* devPtr) {
  const Config* config = runtimeConfig();
  if (config == nullptr) return orErrorInitializationError;
  if (devPtr == nullptr) return orSuccess;
  const uintptr_t address = reinterpret_cast<uintptr_t>(devPtr);
  Device* dev = deviceContaining(*config, address);
  if (dev == nullptr) return notDevicePointer("orFree", address);
  // As cudaFree synchronizes. Before taking the lock: the queued work may
  // need it (a host function can call the runtime).
  synchronizeDevice(dev->index);
  for (;;) {
    std::unique_lock lock(dev->mutex);
    const auto it = dev->allocations.find(address);
    if (it == dev->allocations.end()) {
      return fail(orErrorInvalidDevicePointer,
                  "orFree: %p is not the base of a live allocation of device %d", devPtr,
                  dev->index);
    }
    if (it->second.imported) {
      return fail(orErrorInvalidDevicePointer,
                  "orFree: %p was opened with orIpcOpenMemHandle on device %d; release it with "
                  "orIpcCloseMemHandle",
                  devPtr, dev->index);
    }
    const size_t size = it->second.size;
    if (const uint32_t open = it->second.openAccesses.load(std::memory_order_relaxed); open != 0) {
      return fail(orErrorIllegalState,
                  "orFree: allocation %p (%zu bytes) of device %d still has %u open host "
                  "access(es); call orMemAccessEnd first",
                  devPtr, size, dev->index, open);
    }
    if (it->second.queuedCopies.load(std::memory_order_acquire) == 0) {
      dev->allocations.erase(it);
      dev->arena.load(std::memory_order_relaxed)->release(address, size);
      return orSuccess;
    }
    lock.unlock();
    // Rare: a copy queued on another device's stream (or by another thread
    // since the wait above) still targets the allocation.
    for (int index = 0; index < config->deviceCount; ++index) synchronizeDevice(index);
  }
}

orError_t orMemGetInfo(size_t* freeBytes, size_t* totalBytes) {
  const Config* config = runtimeConfig();
  if (config == nullptr) return orErrorInitializationError;
  if (freeBytes == nullptr || totalBytes == nullptr) {
    return fail(orErrorInvalidValue, "orMemGetInfo: freeBytes or totalBytes is NULL");
  }
  Device& dev = device(currentDevice());
  std::shared_lock lock(dev.mutex);
  const Arena* arena = dev.arena.load(std::memory_order_relaxed);
  *freeBytes = arena != nullptr ? arena->freeBytes() : config->deviceMemory;
  *totalBytes = config->deviceMemory;
  return orSuccess;
}

orError_t orMemAccessBegin(const void* devPtr, size_t size, void** hostPtr) {
  return beginAccesses("orMemAccessBegin", /*batch=*/false, 1, &devPtr, &size, hostPtr);
}

orError_t orMemAccessEnd(const void* devPtr) {
  return endAccesses("orMemAccessEnd", /*batch=*/false, 1, &devPtr);
}

orError_t orMemAccessBeginBatch(size_t count, const void* const* devPtrs, const size_t* sizes,
                                void** hostPtrs) {
  return beginAccesses("orMemAccessBeginBatch", /*batch=*/true, count, devPtrs, sizes, hostPtrs);
}

orError_t orMemAccessEndBatch(size_t count, const void* const* devPtrs) {
  return endAccesses("orMemAccessEndBatch", /*batch=*/true, count, devPtrs);
}

orError_t orPointerGetAttributes(orPointerAttributes* attributes, const void* ptr) {
  const Config* config = runtimeConfig();
  if (config == nullptr) return orErrorInitializationError;
  if (attributes == nullptr) {
    return fail(orErrorInvalidValue, "orPointerGetAttributes: attributes is NULL");
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  if (Device* dev = deviceContaining(*config, address)) {
    std::shared_lock lock(dev->mutex);
    uintptr_t base;
    const Allocation* allocation =
        findAllocation(*dev, address, 0, "orPointerGetAttributes", "pointer", &base);
    if (allocation == nullptr) return orErrorInvalidDevicePointer;
    *attributes = {orMemoryTypeDevice, dev->index, reinterpret_cast<void*>(base), allocation->size};
    return orSuccess;
  }
  uintptr_t base;
  size_t size;
  if (findHostAllocation(address, &base, &size)) {
    *attributes = {orMemoryTypeHost, -1, reinterpret_cast<void*>(base), size};
  } else {
    *attributes = {orMemoryTypeUnregistered, -1, nullptr, 0};
  }
  return orSuccess;
}
