#include "runtime/caching/OpenRegDeviceCache.h"

#include <c10/core/AllocatorConfig.h>

#include "runtime/caching/OpenRegAllocatorSizes.h"
#include "runtime/caching/OpenRegAllocatorStats.h"
#include "runtime/OpenRegMemPool.h"

namespace c10::openreg {

using c10::CachingAllocator::AcceleratorAllocatorConfig;
using c10::CachingDeviceAllocator::DeviceStats;

// The helpers of malloc and free are defined `inline` and used only in this
// file, so GCC folds them into their callers as it would file-local
// functions (it does not for members of external linkage in a -fPIC build).

Block* DeviceCache::malloc(size_t requested, c10::Stream stream) {
  // Before the lock: gathering a Python stack takes the GIL.
  std::shared_ptr<c10::GatheredContext> context = gather_context(RecordContext::STATE);
  std::lock_guard<std::mutex> lock(mutex_);
  process_events();
  const size_t size = round_size(requested);
  BlockPool& pool = select_pool(size);
  const size_t max_split_size = AcceleratorAllocatorConfig::max_split_size();
  const bool default_small = &pool == &small_;
  Block* block = default_small ? bins_.pop(stream, size) : nullptr;
  if (block == nullptr) {
    block = take_cached(pool, size, stream, max_split_size);
  }
  if (block == nullptr && default_small && !bins_.empty()) {
    settle_bins();  // merged, the binned blocks may fit
    block = take_cached(pool, size, stream, max_split_size);
  }
  if (block == nullptr) {
    collect_garbage();
    block = new_segment(pool, size, requested, stream, max_split_size, context);
  }
  if (should_split(*block, size, max_split_size)) {
    auto* rest = new Block(static_cast<char*>(block->ptr) + size, block->size - size, stream, &pool);
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) {
      rest->next->prev = rest;
    }
    block->next = rest;
    block->size = size;
    pool_insert(rest);
  }
  block->allocated = true;
  block->requested_size = requested;
  block->oversize = block->size >= max_split_size;
  if (block->oversize) {
    stats_.oversize_allocations.increase(1);
  }
  for_each_stat(pool, [&](size_t t) {
    stats_.allocation[t].increase(1);
    stats_.allocated_bytes[t].increase(block->size);
    stats_.active[t].increase(1);
    stats_.active_bytes[t].increase(block->size);
    stats_.requested_bytes[t].increase(requested);
  });
  report_to_profiler(block->ptr, static_cast<int64_t>(block->size), stats_, device_);
  if (history_.recording()) {
    history_.record(TraceEntry::ALLOC, device_, block->address(), requested, stream_handle(stream), context);
    history_.set_block_context(block->ptr, std::move(context));
  }
  return block;
}

void DeviceCache::free(Block* block) {
  // Before the lock, as in malloc.
  std::shared_ptr<c10::GatheredContext> context = gather_context(RecordContext::ALL);
  std::lock_guard<std::mutex> lock(mutex_);
  if (history_.recording()) {
    history_.record(
        TraceEntry::FREE_REQUESTED, device_, block->address(), block->requested_size, stream_handle(block->stream),
        context != nullptr ? std::move(context) : history_.block_context(block->ptr));
  }
  block->allocated = false;
  if (block->oversize) {
    stats_.oversize_allocations.decrease(1);
  }
  for_each_stat(*block->pool, [&](size_t t) {
    stats_.allocation[t].decrease(1);
    stats_.allocated_bytes[t].decrease(block->size);
    stats_.requested_bytes[t].decrease(block->requested_size);
  });
  report_to_profiler(block->ptr, -static_cast<int64_t>(block->size), stats_, device_);
  if (!block->stream_uses.empty()) {
    // Used on other streams: reusable once they reach this point.
    for (const c10::Stream& stream : block->stream_uses) {
      auto event = std::make_unique<c10::Event>(c10::DeviceType::PrivateUse1);
      event->record(stream);
      pending_.emplace_back(std::move(event), block);
    }
    block->stream_uses.clear();
    return;
  }
  // While history records, every block takes the merging path, which records
  // its FREE_COMPLETED (settling later records nothing).
  if (block->pool == &small_ && !history_.recording() && caching_enabled() && bins_.push(block)) {
    history_.forget_block(block->ptr);
    for_each_stat(small_, [&](size_t t) {
      stats_.active[t].decrease(1);
      stats_.active_bytes[t].decrease(block->size);
    });
    return;
  }
  release_to_pool(block);
}

void DeviceCache::record_stream(Block* block, c10::Stream stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream != block->stream) {
    block->stream_uses.insert(stream);
  }
}

DeviceStats DeviceCache::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  settle_bins();
  DeviceStats stats = stats_;
  stats.max_split_size = static_cast<int64_t>(AcceleratorAllocatorConfig::max_split_size());
  return stats;
}

void DeviceCache::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  openreg::reset_accumulated_stats(stats_);
}

void DeviceCache::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  settle_bins();  // peaks drop to the settled current values
  openreg::reset_peak_stats(stats_);
}

// The pool this thread allocates from (use_mem_pool), else the default.
inline BlockPool& DeviceCache::select_pool(size_t size) {
  const bool small = size <= kSmallSize;
  if (const std::optional<c10::MempoolId_t> id = pool_for_current_thread(device_)) {
    auto it = private_pools_.find(*id);
    TORCH_INTERNAL_ASSERT(it != private_pools_.end(), "openreg: allocating to a memory pool nobody holds");
    return small ? it->second->small : it->second->large;
  }
  return small ? small_ : large_;
}

// The smallest cached block of `stream` that fits, if any. An oversize block
// (max_split_size or more) serves only a request of that class within
// max_non_split_rounding_mb of it; blocks later in the order are larger
// still, so the first candidate decides.
inline Block* DeviceCache::take_cached(BlockPool& pool, size_t size, c10::Stream stream, size_t max_split_size) {
  Block key(nullptr, size, stream, &pool);
  auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != stream) {
    return nullptr;
  }
  Block* block = *it;
  if (block->size >= max_split_size &&
      (size < max_split_size || block->size - size >= AcceleratorAllocatorConfig::max_non_split_rounding_size())) {
    return nullptr;
  }
  pool_erase(block);
  return block;
}

// Requests of max_split_size or more are never split, so that large blocks
// are not fragmented by small requests.
inline bool DeviceCache::should_split(const Block& block, size_t size, size_t max_split_size) {
  if (block.pool->owner != nullptr && block.pool->owner->no_split) {
    return false;
  }
  const size_t remaining = block.size - size;
  return block.pool->is_small ? remaining >= kMinBlockSize : size < max_split_size && remaining > kSmallSize;
}

// A freed block goes back to its pool, merged with free neighbours.
inline void DeviceCache::release_to_pool(Block* block) {
  if (history_.recording()) {
    history_.record(
        TraceEntry::FREE_COMPLETED, device_, block->address(), block->requested_size, stream_handle(block->stream),
        history_.block_context(block->ptr));
  }
  history_.forget_block(block->ptr);
  const size_t original_size = block->size;
  BlockPool& pool = *block->pool;
  merge_into_pool(block);
  for_each_stat(pool, [&](size_t t) {
    stats_.active[t].decrease(1);
    stats_.active_bytes[t].decrease(original_size);
  });
  release_if_unwanted(block);
}

// Merges a free block with its cached neighbours; the result joins the pool.
inline void DeviceCache::merge_into_pool(Block* block) {
  for (Block* neighbour : {block->prev, block->next}) {
    if (neighbour == nullptr || !neighbour->cached) {
      continue;  // in use, binned, or freed but still awaiting other streams
    }
    pool_erase(neighbour);
    if (neighbour == block->prev) {
      block->ptr = neighbour->ptr;
      block->prev = neighbour->prev;
      if (block->prev != nullptr) {
        block->prev->next = block;
      } else {
        segments_[block->address()] = block;  // the segment's new first block
      }
    } else {
      block->next = neighbour->next;
      if (block->next != nullptr) {
        block->next->prev = block;
      }
    }
    block->size += neighbour->size;
    delete neighbour;
  }
  pool_insert(block);
}

// The last block of a segment that is not to be cached (caching disabled, or
// a released pool's): the segment goes too.
inline void DeviceCache::release_if_unwanted(Block* block) {
  const BlockPool& pool = *block->pool;
  const bool keep = caching_enabled() && (pool.owner == nullptr || pool.owner->use_count > 0);
  if (!keep && !block->is_split()) {
    pool_erase(block);
    release_segment(block);
    drop_released_pools();
  }
}

// Merges every binned block, as free would have without the bins. Their
// statistics other than inactive_split were settled when they were binned.
void DeviceCache::settle_bins() {
  bins_.drain([this](Block* block) {
    merge_into_pool(block);
    release_if_unwanted(block);
  });
}

// Pool membership changes only here. A cached block that shares its segment
// with other blocks is "inactive split": it cannot be returned to the runtime
// until its neighbours are free.
inline void DeviceCache::pool_insert(Block* block) {
  block->pool->blocks.insert(block);
  block->cached = true;
  block->cached_at = ++cache_clock_;
  if (block->is_split()) {
    for_each_stat(*block->pool, [&](size_t t) {
      stats_.inactive_split[t].increase(1);
      stats_.inactive_split_bytes[t].increase(block->size);
    });
  }
}

inline void DeviceCache::pool_erase(Block* block) {
  block->pool->blocks.erase(block);
  block->cached = false;
  if (block->is_split()) {
    for_each_stat(*block->pool, [&](size_t t) {
      stats_.inactive_split[t].decrease(1);
      stats_.inactive_split_bytes[t].decrease(block->size);
    });
  }
}

// Blocks freed while other streams still used them return to the pool once
// every event recorded for them has completed.
inline void DeviceCache::process_events() {
  while (!pending_.empty() && pending_.front().first->query()) {
    Block* block = pending_.front().second;
    pending_.pop_front();
    if (!awaiting_event(block)) {
      release_to_pool(block);
    }
  }
}

void DeviceCache::synchronize_pending() {
  for (auto& [event, block] : pending_) {
    event->synchronize();
  }
  while (!pending_.empty()) {
    Block* block = pending_.front().second;
    pending_.pop_front();
    if (!awaiting_event(block)) {
      release_to_pool(block);
    }
  }
}

inline bool DeviceCache::awaiting_event(const Block* block) const {
  for (const auto& entry : pending_) {
    if (entry.second == block) {
      return true;
    }
  }
  return false;
}

}  // namespace c10::openreg
