#include "runtime/OpenRegMemPool.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

namespace c10::openreg {
namespace {

std::atomic<c10::CaptureId_t> g_next_id{1};

// This thread's active uses of pools, innermost last.
thread_local std::vector<std::pair<c10::DeviceIndex, c10::MempoolId_t>> t_pools;

} // namespace

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

} // namespace c10::openreg
