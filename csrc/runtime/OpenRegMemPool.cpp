#include "runtime/OpenRegMemPool.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "runtime/caching/OpenRegDeviceCache.h"
#include "runtime/OpenRegPluggableAllocator.h"
#include "sanitizer/SanitizerTrace.h"

namespace c10::openreg {
namespace {

std::atomic<c10::CaptureId_t> g_next_id{1};

// This thread's active uses of pools, innermost last.
thread_local std::vector<std::pair<c10::DeviceIndex, c10::MempoolId_t>> t_pools;

}  // namespace

c10::MempoolId_t new_mempool_id(bool user_created) {
  const c10::CaptureId_t id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  return user_created ? c10::MempoolId_t{0, id} : c10::MempoolId_t{id, 0};
}

void begin_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t pool) {
  t_pools.emplace_back(device, pool);
}

void end_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t pool) {
  const auto use = std::find(t_pools.rbegin(), t_pools.rend(), std::make_pair(device, pool));
  TORCH_CHECK(
      use != t_pools.rend(), "openreg: ending the use of memory pool (", pool.first, ", ", pool.second,
      ") on openreg:", static_cast<int>(device), ", which this thread did not begin");
  t_pools.erase(std::next(use).base());
}

std::optional<c10::MempoolId_t> pool_for_current_thread(c10::DeviceIndex device) {
  if (t_pools.empty()) {
    return std::nullopt;
  }
  for (auto it = t_pools.rbegin(); it != t_pools.rend(); ++it) {
    if (it->first == device) {
      return it->second;
    }
  }
  return std::nullopt;
}

void retainMemPool(c10::DeviceIndex device, c10::MempoolId_t id, bool no_split) {
  refuseIfPluggable("MemPool");
  device_cache(device).retain_pool(id, no_split);
}

void releaseMemPool(c10::DeviceIndex device, c10::MempoolId_t id) {
  device_cache(device).release_pool(id);
  sanitizer::trace_noted_synchronization();
}

int memPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t id) {
  return device_cache(device).pool_use_count(id);
}

void DeviceCache::retain_pool(c10::MempoolId_t id, bool no_split) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& pool = private_pools_[id];
  if (pool == nullptr) {
    pool = std::make_unique<PrivatePool>(id, no_split);
  }
  pool->use_count += 1;
}

// The last holder gone, the pool's cached segments return to the runtime;
// segments still in use follow as their blocks are freed.
void DeviceCache::release_pool(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = private_pools_.find(id);
  TORCH_CHECK(
      it != private_pools_.end() && it->second->use_count > 0, "openreg: memory pool (", id.first, ", ", id.second,
      ") is not held on openreg:", static_cast<int>(device_));
  PrivatePool& pool = *it->second;
  if (--pool.use_count == 0) {
    synchronize_pending();
    release_cached(pool.small);
    release_cached(pool.large);
    drop_released_pools();
  }
}

int DeviceCache::pool_use_count(c10::MempoolId_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = private_pools_.find(id);
  return it == private_pools_.end() ? 0 : it->second->use_count;
}

// Forgets released pools that no longer hold memory.
void DeviceCache::drop_released_pools() {
  std::erase_if(
      private_pools_, [](const auto& entry) { return entry.second->use_count == 0 && entry.second->segments == 0; });
}

}  // namespace c10::openreg
