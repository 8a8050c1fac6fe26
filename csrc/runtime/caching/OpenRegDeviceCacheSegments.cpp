// A device cache's segments: the memory it holds from the runtime. A segment
// is requested when no cached block fits (with one retry after returning the
// cache, as CUDA does), capped by set_per_process_memory_fraction, trimmed by
// garbage_collection_threshold, and returned to the runtime by empty_cache or
// once nothing is to be cached.
#include <algorithm>
#include <vector>

#include <c10/core/AllocatorConfig.h>

#include "runtime/caching/OpenRegAllocatorSizes.h"
#include "runtime/caching/OpenRegAllocatorStats.h"
#include "runtime/caching/OpenRegDeviceCache.h"
#include "runtime/OpenRegException.h"
#include "runtime/caching/OpenRegOutOfMemory.h"
#include "runtime/OpenRegPluggableAllocator.h"
#include "sanitizer/SanitizerTrace.h"

namespace c10::openreg {

using c10::CachingAllocator::AcceleratorAllocatorConfig;

void DeviceCache::empty_cache(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  synchronize_pending();
  settle_bins();
  if (id == c10::MempoolId_t{0, 0}) {
    release_cached(small_);
    release_cached(large_);
    return;
  }
  auto it = private_pools_.find(id);
  if (it != private_pools_.end()) {
    release_cached(it->second->small);
    release_cached(it->second->large);
    drop_released_pools();
  }
}

void DeviceCache::set_memory_fraction(double fraction, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_fraction_ = fraction;
  allowed_bytes_ = static_cast<size_t>(fraction * static_cast<double>(capacity));
}

double DeviceCache::memory_fraction() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return memory_fraction_;
}

Block* DeviceCache::new_segment(
    BlockPool& pool, size_t size, size_t requested, c10::Stream stream, size_t max_split_size,
    const std::shared_ptr<c10::GatheredContext>& context) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      !AcceleratorAllocatorConfig::use_expandable_segments(),
      "openreg: the allocator setting expandable_segments:True (PYTORCH_ALLOC_CONF) is not supported: the "
      "openreg runtime cannot grow a device mapping in place. Remove it or set expandable_segments:False.");
  size_t bytes = segment_size(size);
  void* ptr = nullptr;
  orError_t err = runtime_malloc(&ptr, &bytes, size);
  if (err == orErrorMemoryAllocation) {
    // Return what the cache holds and try once more, as CUDA does.
    stats_.num_alloc_retries += 1;
    synchronize_pending();
    settle_bins();
    release_cached(small_);
    release_cached(large_);
    bytes = segment_size(size);
    err = runtime_malloc(&ptr, &bytes, size);
  }
  if (err == orErrorMemoryAllocation) {
    stats_.num_ooms += 1;
    if (history_.recording()) {
      size_t free_bytes = 0;
      size_t total_bytes = 0;
      (void)orMemGetInfo(&free_bytes, &total_bytes);
      history_.record(TraceEntry::OOM, device_, free_bytes, requested, stream_handle(stream), context);
    }
    raise_out_of_memory({device_, requested, size, stats_, memory_fraction_, allowed_bytes_});
  }
  OPENREG_CHECK(err);
  stats_.num_device_alloc += 1;
  if (bytes >= max_split_size) {
    stats_.oversize_segments.increase(1);
  }
  for_each_stat(pool, [&](size_t t) {
    stats_.segment[t].increase(1);
    stats_.reserved_bytes[t].increase(bytes);
  });
  auto* segment = new Block(ptr, bytes, stream, &pool);
  segments_.emplace(segment->address(), segment);
  if (pool.owner != nullptr) {
    pool.owner->segments += 1;
  }
  if (history_.recording()) {
    history_.record(TraceEntry::SEGMENT_ALLOC, device_, segment->address(), bytes, stream_handle(stream), context);
    history_.set_segment_context(ptr, context);
  }
  return segment;
}

// Asks for a whole segment of *bytes; when the device (or the memory
// fraction) cannot hold that much but can hold the request itself (a small or
// nearly full device), settles for a segment of exactly `size`, updating
// *bytes. Past the memory fraction, fails as the runtime does when full.
orError_t DeviceCache::runtime_malloc(void** ptr, size_t* bytes, size_t size) {
  markCachingAllocatorUsed();  // the allocator can no longer be swapped
  const auto reserved = static_cast<size_t>(aggregate_reserved(stats_));
  const auto fits_fraction = [&](size_t n) { return reserved + n <= allowed_bytes_; };
  orError_t err = fits_fraction(*bytes) ? orMalloc(ptr, *bytes) : orErrorMemoryAllocation;
  if (err == orErrorMemoryAllocation && *bytes > size) {
    *bytes = size;
    err = fits_fraction(*bytes) ? orMalloc(ptr, *bytes) : orErrorMemoryAllocation;
  }
  return err;
}

// garbage_collection_threshold: with a memory fraction set, once reserved
// memory passes the threshold's share of the allowed memory, whole cached
// segments go back to the runtime, longest-cached first, until it is below.
void DeviceCache::collect_garbage() {
  const double threshold = AcceleratorAllocatorConfig::garbage_collection_threshold();
  if (threshold <= 0.0 || memory_fraction_ >= 1.0) {
    return;
  }
  const auto target = static_cast<size_t>(threshold * static_cast<double>(allowed_bytes_));
  const auto reserved = [&] { return static_cast<size_t>(aggregate_reserved(stats_)); };
  if (reserved() <= target) {
    return;
  }
  settle_bins();
  std::vector<Block*> segments;
  for (BlockPool* pool : {&small_, &large_}) {
    for (Block* block : pool->blocks) {
      if (!block->is_split()) {
        segments.push_back(block);
      }
    }
  }
  std::sort(
      segments.begin(), segments.end(), [](const Block* a, const Block* b) { return a->cached_at < b->cached_at; });
  for (Block* block : segments) {
    if (reserved() <= target) {
      break;
    }
    block->pool->blocks.erase(block);
    release_segment(block);
  }
}

void DeviceCache::release_cached(BlockPool& pool) {
  for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
    Block* block = *it;
    if (block->is_split()) {
      ++it;
      continue;
    }
    it = pool.blocks.erase(it);
    release_segment(block);
  }
}

// Returns a whole cached segment, already out of its pool's set, to the runtime.
void DeviceCache::release_segment(Block* block) {
  OPENREG_CHECK(orFree(block->ptr));
  sanitizer::note_runtime_free();
  segments_.erase(block->address());
  if (history_.recording()) {
    history_.record(
        TraceEntry::SEGMENT_FREE, device_, block->address(), block->size, stream_handle(block->stream),
        history_.segment_context(block->ptr));
  }
  history_.forget_segment(block->ptr);
  if (block->pool->owner != nullptr) {
    block->pool->owner->segments -= 1;
  }
  stats_.num_device_free += 1;
  if (block->size >= AcceleratorAllocatorConfig::max_split_size()) {
    stats_.oversize_segments.decrease(1);
  }
  for_each_stat(*block->pool, [&](size_t t) {
    stats_.segment[t].decrease(1);
    stats_.reserved_bytes[t].decrease(block->size);
  });
  delete block;
}

}  // namespace c10::openreg
