#pragma once

#include <vector>

#include <c10/core/CachingDeviceAllocator.h>

#include "runtime/OpenRegMemoryHistory.h"

namespace c10::openreg {

// The allocator behind every openreg tensor (registered for PrivateUse1, so
// torch.accelerator.memory.* reads its statistics). Deleters run with or
// without the GIL held by the caller and never touch Python.
c10::DeviceAllocator* getDeviceAllocator();

// torch.openreg.set_per_process_memory_fraction: caps the memory the cache
// reserves on `device` at fraction (0, 1] of its capacity.
void setMemoryFraction(double fraction, c10::DeviceIndex device);
double getMemoryFraction(c10::DeviceIndex device);

// torch.openreg.caching_allocator_alloc / caching_allocator_delete: a raw
// block of the cache, allocated on `stream` (nullptr for 0 bytes), and its
// release; raw_free raises for an address the cache did not hand out.
void* raw_alloc(size_t nbytes, c10::Stream stream);
void raw_free(void* ptr);

// torch.openreg.caching_allocator_enable: while disabled, memory freed by
// tensors returns to the runtime at once (disabling empties the cache).
void setCachingEnabled(bool enabled);
bool cachingEnabled();

// torch.openreg.memory._record_memory_history: starts, changes or stops
// recording on every device.
void recordMemoryHistory(const HistoryOptions& options);

// The allocator's state on every device: its segments (address order, device
// by device) with their blocks, and each device's recorded history.
struct MemorySnapshot {
  std::vector<c10::CachingDeviceAllocator::SegmentInfo> segments;
  std::vector<std::vector<TraceEntry>> device_traces;
};
MemorySnapshot memorySnapshot();

// Private pools (OpenRegMemPool.h): a holder (a MemPool, a use_mem_pool
// context) retains pool `id` on `device`, creating it on first use; when the
// last holder releases it, its memory returns to the runtime as soon as its
// blocks are free.
void retainMemPool(c10::DeviceIndex device, c10::MempoolId_t id, bool no_split);
void releaseMemPool(c10::DeviceIndex device, c10::MempoolId_t id);
int memPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t id);

} // namespace c10::openreg
