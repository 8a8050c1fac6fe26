#pragma once

#include <optional>
#include <utility>

#include <c10/core/CachingDeviceAllocator.h>

// The allocator behind every openreg tensor, modelled on CUDA's caching
// allocator: one cache per device (OpenRegDeviceCache.h) behind a
// c10::DeviceAllocator registered for PrivateUse1, so
// torch.accelerator.memory.* reads its statistics. Private pools are
// OpenRegMemPool.h, history and snapshots OpenRegMemorySnapshot.h.
namespace c10::openreg {

// The current allocator: the caching one, or the pluggable one once
// change_current_allocator installed it. Deleters run with or without the GIL
// held by the caller and never touch Python.
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

// The size and stream of a block the caching allocator handed out at `ptr`
// and has not taken back yet (nullopt otherwise): the extent of an allocation
// the sanitizer's trace reports by address only.
std::optional<std::pair<size_t, c10::Stream>> allocatedBlock(void* ptr);

// torch.openreg.caching_allocator_enable: while disabled, memory freed by
// tensors returns to the runtime at once (disabling empties the cache).
void setCachingEnabled(bool enabled);
bool cachingEnabled();

}  // namespace c10::openreg
