#pragma once

#include <optional>

#include <c10/core/CachingDeviceAllocator.h>

// Private memory pools (torch.openreg.MemPool / use_mem_pool, graph pools):
// pool ids, which pool the current thread allocates from, and who holds a
// pool. The blocks of a pool live in the device cache (OpenRegDeviceCache.h)
// apart from the device's default pool: a block of a pool only ever serves
// that pool's allocations, and the pool's memory returns to the runtime once
// the pool is released and its blocks are free.
namespace c10::openreg {

// A new pool id, unique in the process. As CUDA numbers them: {0, n} for
// pools users create (MemPool, graph_pool_handle), {n, 0} for the pool a
// graph creates for its own capture.
c10::MempoolId_t new_mempool_id(bool user_created);

// use_mem_pool: until the matching end, allocations of this thread on
// `device` go to `pool` (the innermost of nested uses). Other threads, and
// other devices, keep their own pools.
void begin_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t pool);
void end_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t pool);

// The pool this thread allocates from on `device`; none means the default
// pool. While no thread uses a pool this is one thread-local emptiness check.
std::optional<c10::MempoolId_t> pool_for_current_thread(c10::DeviceIndex device);

// A holder (a MemPool, a use_mem_pool context) retains pool `id` on `device`,
// creating it on first use; when the last holder releases it, its memory
// returns to the runtime as soon as its blocks are free.
void retainMemPool(c10::DeviceIndex device, c10::MempoolId_t id, bool no_split);
void releaseMemPool(c10::DeviceIndex device, c10::MempoolId_t id);
int memPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t id);

}  // namespace c10::openreg
