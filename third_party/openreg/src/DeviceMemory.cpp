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
  const auto next = device.allocations.upper_bound(address);
  if (next == device.allocations.begin() ||
      address - std::prev(next)->first >= std::prev(next)->second.size) {
    fail(orErrorInvalidDevicePointer, "%s: the %s %p is not inside a live allocation of device %d",
         context, role, reinterpret_cast<void*>(address), device.index);
    return nullptr;
  }
  auto& [start, allocation] = *std::prev(next);
  if (bytes > allocation.size - (address - start)) {
    fail(orErrorInvalidDevicePointer,
         "%s: the %s range [%p, +%zu bytes) exceeds its allocation [%p, %p) of device %d",
         context, role, reinterpret_cast<void*>(address), bytes, reinterpret_cast<void*>(start),
         reinterpret_cast<void*>(start + allocation.size), device.index);
    return nullptr;
  }
  *base = start;
  return &allocation;
}

}  // namespace openreg::runtime

using namespace openreg::runtime;

namespace {

orError_t notDevicePointer(const char* context, uintptr_t address) {
  return fail(orErrorInvalidDevicePointer, "%s: %p is not a device pointer", context,
              reinterpret_cast<void*>(address));
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
  const Config* config = runtimeConfig();
  if (config == nullptr) return orErrorInitializationError;
  if (hostPtr == nullptr) return fail(orErrorInvalidValue, "orMemAccessBegin: hostPtr is NULL");
  const uintptr_t address = reinterpret_cast<uintptr_t>(devPtr);
  Device* dev = deviceContaining(*config, address);
  if (dev == nullptr) return notDevicePointer("orMemAccessBegin", address);
  std::shared_lock lock(dev->mutex);
  uintptr_t base;
  Allocation* allocation =
      findAllocation(*dev, address, size, "orMemAccessBegin", "pointer", &base);
  if (allocation == nullptr) return orErrorInvalidDevicePointer;
  allocation->openAccesses.fetch_add(1, std::memory_order_relaxed);
  *hostPtr = allocation->hostAddress(address);
  return orSuccess;
}

orError_t orMemAccessEnd(const void* devPtr) {
  const Config* config = runtimeConfig();
  if (config == nullptr) return orErrorInitializationError;
  const uintptr_t address = reinterpret_cast<uintptr_t>(devPtr);
  Device* dev = deviceContaining(*config, address);
  if (dev == nullptr) return notDevicePointer("orMemAccessEnd", address);
  std::shared_lock lock(dev->mutex);
  uintptr_t base;
  Allocation* allocation = findAllocation(*dev, address, 0, "orMemAccessEnd", "pointer", &base);
  if (allocation == nullptr) return orErrorInvalidDevicePointer;
  // Other threads may end their own accesses concurrently: never go below 0.
  uint32_t open = allocation->openAccesses.load(std::memory_order_relaxed);
  do {
    if (open == 0) {
      return fail(orErrorIllegalState,
                  "orMemAccessEnd: allocation %p (%zu bytes) of device %d has no open host "
                  "access for %p",
                  reinterpret_cast<void*>(base), allocation->size, dev->index, devPtr);
    }
  } while (!allocation->openAccesses.compare_exchange_weak(open, open - 1,
                                                           std::memory_order_relaxed));
  return orSuccess;
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
