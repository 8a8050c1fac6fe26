#pragma once

#include <sys/types.h>

#include <c10/core/CachingDeviceAllocator.h>

#include <openreg.h>

namespace c10::openreg {

// torch.openreg.memory.OpenRegPluggableAllocator: device memory comes from two
// functions of a user's shared library, with CUDAPluggableAllocator's
// signatures (the runtime's stream in place of cudaStream_t).
using PluggableAllocFn = void* (*)(ssize_t size, int device, orStream_t stream);
using PluggableFreeFn = void (*)(void* ptr, ssize_t size, int device, orStream_t stream);

// torch.openreg.memory.change_current_allocator: from now on every openreg
// allocation goes through alloc_fn/free_fn. As in CUDA, refused once the
// current allocator (the caching one, or a pluggable one already installed)
// has been used.
void changeCurrentAllocator(PluggableAllocFn alloc_fn, PluggableFreeFn free_fn);

// The installed pluggable allocator, or nullptr while the caching allocator
// is current. Once installed it is never replaced.
c10::DeviceAllocator* pluggableAllocator();

// Raises for a caching-allocator feature (snapshots, pools, IPC, ...) while a
// pluggable allocator is current, as CUDA's pluggable allocator does.
void refuseIfPluggable(const char* feature);

// caching_allocator_alloc/delete on the pluggable allocator.
void* pluggableRawAlloc(size_t nbytes, c10::Stream stream);
void pluggableRawFree(void* ptr);

// Set by the caching allocator once it has reserved device memory: from then
// on the allocator cannot be swapped.
void markCachingAllocatorUsed();

}  // namespace c10::openreg
