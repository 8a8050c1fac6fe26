#include "DeviceMemory.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <optional>
#include <string>

#include "Error.h"
#include "HostMemory.h"
#include "ReadSection.h"
#include "Stream.h"

namespace openreg::runtime {

orError_t notInsideAllocation(const Device& device, uintptr_t address, const char* context, const char* role) {
  return fail(
      orErrorInvalidDevicePointer, "%s: the %s %p is not inside a live allocation of device %d", context, role,
      reinterpret_cast<void*>(address), device.index);
}

namespace {

// With device.mutex held: publishes table, keeping the replaced one until
// readers are done with it.
void publish(Device& device, const AllocationTable* table) {
  if (const AllocationTable* replaced = device.allocations.load(std::memory_order_relaxed)) {
    device.retired.push_back(replaced);
  }
  device.allocations.store(table, std::memory_order_release);
}

// With device.mutex held, after waitForReaders(): no reader holds a retired table.
void deleteRetired(Device& device) {
  for (const AllocationTable* table : device.retired)
    delete table;
  device.retired.clear();
}

// Retired tables kept before orMalloc waits for readers itself; orFree waits
// anyway and deletes them then. Bounds the memory that allocation-only
// stretches hold in old tables.
constexpr size_t kMaxRetiredTables = 16;

}  // namespace

Allocation* findAllocation(
    const Device& device, const AllocationTable& table, uintptr_t address, size_t bytes, const char* context,
    const char* role, uintptr_t* base) {
  if (Allocation* allocation = lookupAllocation(table, address, bytes, base))
    return allocation;
  uintptr_t start;
  const Allocation* allocation = lookupAllocation(table, address, 0, &start);
  if (allocation == nullptr) {
    notInsideAllocation(device, address, context, role);
    return nullptr;
  }
  fail(
      orErrorInvalidDevicePointer, "%s: the %s range [%p, +%zu bytes) exceeds its allocation [%p, %p) of device %d",
      context, role, reinterpret_cast<void*>(address), bytes, reinterpret_cast<void*>(start),
      reinterpret_cast<void*>(start + allocation->size), device.index);
  return nullptr;
}

void insertAllocation(Device& device, uintptr_t base, Allocation* allocation) {
  const AllocationTable& current = *currentAllocations(device);
  auto* table = new AllocationTable(current);
  table->entries.insert(table->entries.begin() + (current.after(base) - current.entries.begin()), {base, allocation});
  publish(device, table);
  if (device.retired.size() >= kMaxRetiredTables) {
    waitForReaders();
    deleteRetired(device);
  }
}

void removeAllocation(Device& device, uintptr_t base) {
  const AllocationTable& current = *currentAllocations(device);
  auto* table = new AllocationTable(current);
  const auto at = table->entries.begin() + (current.after(base) - current.entries.begin() - 1);
  Allocation* removed = at->allocation;
  table->entries.erase(at);
  publish(device, table);
  waitForReaders();
  deleteRetired(device);
  delete removed;
}

}  // namespace openreg::runtime

using namespace openreg::runtime;

namespace {

orError_t notDevicePointer(const char* context, uintptr_t address) {
  return fail(orErrorInvalidDevicePointer, "%s: %p is not a device pointer", context, reinterpret_cast<void*>(address));
}

// Scoped accesses, alone (orMemAccessBegin/End) or batched: the pointers
// and how messages name them ("pointer" alone, "devPtrs[i]" in a batch).
struct Accesses {
  Accesses(const Config& config, const char* api, bool batch, size_t count, const void* const* devPtrs)
      : config(config), api(api), batch(batch), count(count), devPtrs(devPtrs) {}

  const Config& config;
  const char* api;
  bool batch;
  size_t count;
  const void* const* devPtrs;

  // The runs of the first complete walk (forEachRun).
  struct Run {
    Allocation* allocation;
    uintptr_t base;
    size_t first, end;
  };
  std::array<Run, 8> kept;  // the first keptRuns are set
  size_t keptRuns = 0;  // may exceed kept.size(): then nothing is replayed
  bool walked = false;

  uintptr_t address(size_t i) const {
    return reinterpret_cast<uintptr_t>(devPtrs[i]);
  }
  std::string role(size_t i) const {
    return batch ? "devPtrs[" + std::to_string(i) + "]" : std::string("pointer");
  }

  // The device of the first pointer, found without a lock. The walk
  // (forEachRun) looks for every pointer among that device's allocations
  // only, which no other device's memory is among, so only a pointer it
  // misses needs its own device found (reportMissing).
  orError_t firstDevice(Device** found) const {
    *found = deviceContaining(config, address(0));
    return *found != nullptr ? orSuccess : reportNotDevicePointer(0);
  }

  orError_t reportNotDevicePointer(size_t i) const {
    return fail(
        orErrorInvalidDevicePointer, "%s: %s%p is not a device pointer", api, batch ? (role(i) + " ").c_str() : "",
        devPtrs[i]);
  }

  // The first pointer, in order, that is not device memory or is memory of
  // another device than the first pointer's (recording why); orSuccess if
  // there is none.
  orError_t checkOneDevice(const Device& dev) const {
    for (size_t i = 1; i < count; ++i) {
      const Device* owner = deviceContaining(config, address(i));
      if (owner == nullptr)
        return reportNotDevicePointer(i);
      if (owner != &dev) {
        return fail(
            orErrorInvalidValue,
            "%s: devPtrs[%zu] %p is memory of device %d, devPtrs[0] %p of device %d: one "
            "batch reaches one device",
            api, i, devPtrs[i], owner->index, devPtrs[0], dev.index);
      }
    }
    return orSuccess;
  }

  // Inside a ReadSection: the allocation of table holding [address(i),
  // +bytes), trying the previous pointer's (at *base) first, since a call's
  // arguments often share one. Null if there is none.
  Allocation* find(const AllocationTable& table, size_t i, size_t bytes, Allocation* previous, uintptr_t* base) const {
    if (previous != nullptr && holds(*previous, *base, address(i), bytes))
      return previous;
    return lookupAllocation(table, address(i), bytes, base);
  }

  // Inside a ReadSection: the allocation of table that holds every pointer
  // with its range, its base in *base, if there is one. Such a batch (a
  // kernel's operands in one segment of a caching allocator) is one run, and
  // one update of its count is all or nothing by itself, so it needs no walk.
  // Null otherwise: the walk (forEachRun) then finds the runs or reports the
  // pointer that is missing.
  Allocation* onlyAllocation(const AllocationTable& table, const size_t* sizes, uintptr_t* base) const {
    Allocation* allocation = lookupAllocation(table, address(0), sizes != nullptr ? sizes[0] : 0, base);
    if (allocation == nullptr)
      return nullptr;
    for (size_t i = 1; i < count; ++i) {
      if (!holds(*allocation, *base, address(i), sizes != nullptr ? sizes[i] : 0))
        return nullptr;
    }
    return allocation;
  }

  // Records why find failed for pointer i and returns the error: as if every
  // pointer's device had been checked before the walk, a pointer (any, the
  // first in order) that is not on the first one's device is named first.
  [[gnu::noinline]] orError_t reportMissing(
      const Device& dev, const AllocationTable& table, size_t i, size_t bytes) const {
    if (const orError_t error = checkOneDevice(dev); error != orSuccess)
      return error;
    uintptr_t base;
    findAllocation(dev, table, address(i), bytes, api, role(i).c_str(), &base);
    return orErrorInvalidDevicePointer;
  }

  // Records why the run of allocation (at base) that starts at pointer first
  // cannot be ended, given the allocation's uses, and returns the error.
  [[gnu::noinline]] orError_t reportNotOpen(
      const Device& dev, const Allocation& allocation, uintptr_t base, size_t first, uint64_t uses) const {
    if ((uses & Allocation::kReleased) != 0) {
      return notInsideAllocation(dev, address(first), api, role(first).c_str());
    }
    const size_t failing = first + Allocation::openAccesses(uses);
    return fail(
        orErrorIllegalState, "%s: allocation %p (%zu bytes) of device %d has no open host access for %s%p", api,
        reinterpret_cast<void*>(base), allocation.size, dev.index, batch ? (role(failing) + " ").c_str() : "",
        devPtrs[failing]);
  }

  // Calls apply(allocation, base, first, end) for every run [first, end) of
  // consecutive pointers into one allocation among the first `limit`, in
  // order, stopping at a pointer outside every allocation or at apply's first
  // error. Runs are what the counts are updated by: one atomic instruction
  // per run, not per pointer (locked instructions cost tens of ordinary
  // instructions' time each). sizes may be null (all 0). Every call of one
  // batch sees the same table (one ReadSection), so the first walk keeps
  // its runs and the passes after it replay them instead of finding every
  // pointer again; a batch with more runs than are kept walks again.
  template <typename Apply>
  orError_t forEachRun(
      const Device& dev, const AllocationTable& table, const size_t* sizes, size_t limit, Apply&& apply) {
    if (walked && keptRuns <= kept.size()) {
      for (size_t r = 0; r < keptRuns && kept[r].end <= limit; ++r) {
        const Run& run = kept[r];
        if (const orError_t error = apply(*run.allocation, run.base, run.first, run.end); error != orSuccess) {
          return error;
        }
      }
      return orSuccess;
    }
    const bool keep = !walked;
    Allocation* run = nullptr;
    uintptr_t runBase = 0, base = 0;
    size_t first = 0;
    for (size_t i = 0; i <= limit; ++i) {
      Allocation* allocation = nullptr;
      if (i < limit) {
        const size_t bytes = sizes != nullptr ? sizes[i] : 0;
        allocation = find(table, i, bytes, run, &base);
        if (allocation == nullptr)
          return reportMissing(dev, table, i, bytes);
      }
      if (allocation == run)
        continue;
      if (run != nullptr) {
        if (keep && keptRuns++ < kept.size())
          kept[keptRuns - 1] = Run{run, runBase, first, i};
        if (const orError_t error = apply(*run, runBase, first, i); error != orSuccess) {
          return error;
        }
      }
      run = allocation;
      runBase = base;
      first = i;
    }
    walked = walked || limit == count;
    return orSuccess;
  }
};

orError_t beginAccesses(
    const char* api, bool batch, size_t count, const void* const* devPtrs, const size_t* sizes, void** hostPtrs) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (count == 0)
    return orSuccess;
  if (devPtrs == nullptr || sizes == nullptr || hostPtrs == nullptr) {
    return fail(
        orErrorInvalidValue, "%s: %s is NULL (count %zu)", api, batch ? "devPtrs, sizes or hostPtrs" : "hostPtr",
        count);
  }
  Accesses accesses{*config, api, batch, count, devPtrs};
  Device* dev;
  if (const orError_t error = accesses.firstDevice(&dev); error != orSuccess)
    return error;
  const ReadSection section;
  const AllocationTable& table = *currentAllocations(*dev);
  uintptr_t onlyBase;
  if (Allocation* allocation = accesses.onlyAllocation(table, sizes, &onlyBase)) {
    if (!allocation->addUses(count)) {
      return notInsideAllocation(*dev, accesses.address(0), api, accesses.role(0).c_str());
    }
    for (size_t i = 0; i < count; ++i)
      hostPtrs[i] = allocation->hostAddress(accesses.address(i));
    return orSuccess;
  }
  // All pointers are found before any count changes, so a bad one leaves
  // every count as it was (and no concurrent orFree sees a passing count).
  if (const orError_t error = accesses.forEachRun(
          *dev, table, sizes, count,
          [&](const Allocation& allocation, uintptr_t, size_t first, size_t end) {
            for (size_t i = first; i < end; ++i) {
              hostPtrs[i] = allocation.hostAddress(accesses.address(i));
            }
            return orSuccess;
          });
      error != orSuccess) {
    return error;
  }
  // Counting fails only for an allocation that orFree released meanwhile.
  size_t counted = 0;
  const orError_t error =
      accesses.forEachRun(*dev, table, sizes, count, [&](Allocation& allocation, uintptr_t, size_t first, size_t end) {
        if (!allocation.addUses(end - first)) {
          return notInsideAllocation(*dev, accesses.address(first), api, accesses.role(first).c_str());
        }
        counted = end;
        return orSuccess;
      });
  if (error != orSuccess) {
    accesses.forEachRun(*dev, table, sizes, counted, [](Allocation& allocation, uintptr_t, size_t first, size_t end) {
      allocation.uses.fetch_sub(end - first, std::memory_order_relaxed);
      return orSuccess;
    });
  }
  return error;
}

orError_t endAccesses(const char* api, bool batch, size_t count, const void* const* devPtrs) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (count == 0)
    return orSuccess;
  if (devPtrs == nullptr)
    return fail(orErrorInvalidValue, "%s: devPtrs is NULL (count %zu)", api, count);
  Accesses accesses{*config, api, batch, count, devPtrs};
  Device* dev;
  if (const orError_t error = accesses.firstDevice(&dev); error != orSuccess)
    return error;
  const ReadSection section;
  const AllocationTable& table = *currentAllocations(*dev);
  // Error unless the run's allocation has as many open accesses as the run
  // has pointers (the released one has none).
  const auto checkOpen = [&](const Allocation& allocation, uintptr_t base, size_t first, size_t end, uint64_t uses) {
    if ((uses & Allocation::kReleased) == 0 && Allocation::openAccesses(uses) >= end - first) {
      return orSuccess;
    }
    return accesses.reportNotOpen(*dev, allocation, base, first, uses);
  };
  // Fails only if other threads ended the same accesses meanwhile: never
  // below 0. Release: an orFree that sees the count reach 0 also sees the
  // host-side reads and writes of the accesses done.
  const auto endRun = [&](Allocation& allocation, uintptr_t base, size_t first, size_t end) {
    uint64_t uses = allocation.uses.load(std::memory_order_relaxed);
    do {
      if (const orError_t failed = checkOpen(allocation, base, first, end, uses); failed != orSuccess) {
        return failed;
      }
    } while (!allocation.uses.compare_exchange_weak(
        uses, uses - (end - first), std::memory_order_release, std::memory_order_relaxed));
    return orSuccess;
  };
  uintptr_t onlyBase;
  if (Allocation* allocation = accesses.onlyAllocation(table, nullptr, &onlyBase)) {
    return endRun(*allocation, onlyBase, 0, count);
  }
  // Checked before any count changes, so ending what is not open changes
  // nothing (and no concurrent orFree sees a count that is later restored).
  if (const orError_t error = accesses.forEachRun(
          *dev, table, nullptr, count,
          [&](const Allocation& allocation, uintptr_t base, size_t first, size_t end) {
            return checkOpen(allocation, base, first, end, allocation.uses.load(std::memory_order_relaxed));
          });
      error != orSuccess) {
    return error;
  }
  size_t ended = 0;
  const orError_t error = accesses.forEachRun(
      *dev, table, nullptr, count, [&](Allocation& allocation, uintptr_t base, size_t first, size_t end) {
        if (const orError_t failed = endRun(allocation, base, first, end); failed != orSuccess) {
          return failed;
        }
        ended = end;
        return orSuccess;
      });
  if (error != orSuccess) {
    accesses.forEachRun(*dev, table, nullptr, ended, [](Allocation& allocation, uintptr_t, size_t first, size_t end) {
      allocation.uses.fetch_add(end - first, std::memory_order_relaxed);
      return orSuccess;
    });
  }
  return error;
}

}  // namespace

orError_t orMalloc(void** devPtr, size_t size) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (devPtr == nullptr)
    return fail(orErrorInvalidValue, "orMalloc: devPtr is NULL");
  if (size == 0) {
    *devPtr = nullptr;
    return orSuccess;
  }
  Device& dev = device(currentDevice());
  std::lock_guard lock(dev.mutex);
  Arena* arena = dev.arena.load(std::memory_order_relaxed);
  // Requests beyond the capacity fail without creating the arena (and before
  // rounding, which could overflow).
  if (size <= config->deviceMemory) {
    if (arena == nullptr) {
      std::string error;
      arena = Arena::create(dev.index, config->deviceMemory, config->memoryProtection, &error);
      if (arena == nullptr)
        return fail(orErrorMemoryAllocation, "%s", error.c_str());
      dev.arena.store(arena, std::memory_order_release);
    }
    const size_t bytes = config->roundUpToPage(size);
    if (const std::optional<uintptr_t> address = arena->allocate(bytes)) {
      insertAllocation(dev, *address, new Allocation(bytes, arena->hostDelta()));
      *devPtr = reinterpret_cast<void*>(*address);
      return orSuccess;
    }
  }
  const size_t freeBytes = arena != nullptr ? arena->freeBytes() : config->deviceMemory;
  const size_t largest = arena != nullptr ? arena->largestFreeRange() : config->deviceMemory;
  return fail(
      orErrorMemoryAllocation,
      "out of memory on device %d: requested %zu bytes; capacity %zu bytes, %zu bytes in "
      "use, %zu bytes free, largest free range %zu bytes",
      dev.index, size, config->deviceMemory, config->deviceMemory - freeBytes, freeBytes, largest);
}

orError_t orFree(void* devPtr) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (devPtr == nullptr)
    return orSuccess;
  const uintptr_t address = reinterpret_cast<uintptr_t>(devPtr);
  Device* dev = deviceContaining(*config, address);
  if (dev == nullptr)
    return notDevicePointer("orFree", address);
  // As cudaFree synchronizes. Before taking the lock: the queued work may
  // need it (a host function can call the runtime).
  synchronizeDevice(dev->index);
  for (;;) {
    std::unique_lock lock(dev->mutex);
    uintptr_t base;
    Allocation* allocation = lookupAllocation(*currentAllocations(*dev), address, 0, &base);
    if (allocation == nullptr || base != address) {
      return fail(
          orErrorInvalidDevicePointer, "orFree: %p is not the base of a live allocation of device %d", devPtr,
          dev->index);
    }
    if (allocation->imported) {
      return fail(
          orErrorInvalidDevicePointer,
          "orFree: %p was opened with orIpcOpenMemHandle on device %d; release it with "
          "orIpcCloseMemHandle",
          devPtr, dev->index);
    }
    const size_t size = allocation->size;
    const uint64_t uses = allocation->release();
    if (uses == 0) {
      removeAllocation(*dev, address);
      // Only now: no copy that found the allocation is still running.
      dev->arena.load(std::memory_order_relaxed)->release(address, size);
      return orSuccess;
    }
    if (const uint32_t open = Allocation::openAccesses(uses); open != 0) {
      return fail(
          orErrorIllegalState,
          "orFree: allocation %p (%zu bytes) of device %d still has %u open host "
          "access(es); call orMemAccessEnd first",
          devPtr, size, dev->index, open);
    }
    lock.unlock();
    // Rare: a copy queued on another device's stream (or by another thread
    // since the wait above) still targets the allocation.
    for (int index = 0; index < config->deviceCount; ++index)
      synchronizeDevice(index);
  }
}

orError_t orMemGetInfo(size_t* freeBytes, size_t* totalBytes) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (freeBytes == nullptr || totalBytes == nullptr) {
    return fail(orErrorInvalidValue, "orMemGetInfo: freeBytes or totalBytes is NULL");
  }
  Device& dev = device(currentDevice());
  std::lock_guard lock(dev.mutex);
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

orError_t orMemAccessBeginBatch(size_t count, const void* const* devPtrs, const size_t* sizes, void** hostPtrs) {
  return beginAccesses("orMemAccessBeginBatch", /*batch=*/true, count, devPtrs, sizes, hostPtrs);
}

orError_t orMemAccessEndBatch(size_t count, const void* const* devPtrs) {
  return endAccesses("orMemAccessEndBatch", /*batch=*/true, count, devPtrs);
}

orError_t orPointerGetAttributes(orPointerAttributes* attributes, const void* ptr) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (attributes == nullptr) {
    return fail(orErrorInvalidValue, "orPointerGetAttributes: attributes is NULL");
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  if (Device* dev = deviceContaining(*config, address)) {
    const ReadSection section;
    uintptr_t base;
    const Allocation* allocation =
        findAllocation(*dev, *currentAllocations(*dev), address, 0, "orPointerGetAttributes", "pointer", &base);
    if (allocation == nullptr)
      return orErrorInvalidDevicePointer;
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
