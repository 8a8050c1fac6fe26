#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Event.h>

#include "runtime/caching/OpenRegBlockPool.h"
#include "runtime/OpenRegMemoryHistory.h"
#include "runtime/caching/OpenRegSizeBins.h"
#include "runtime/OpenRegStream.h"

// The caching allocator of one device, CUDA's DeviceCachingAllocator: freed
// blocks stay cached per stream and serve later requests, so the runtime's
// orMalloc/orFree (a mapping update and page faults each) run only when the
// cache cannot serve a request. A cached block is split when the remainder is
// worth keeping, and freed neighbours within a segment merge again.
//
// Fast path: a freed small block of the default pool first waits unmerged in
// exact-size bins (OpenRegSizeBins.h), where the next request of its size and
// stream finds it; the bins are settled into the pool before the pool is
// searched in vain, emptied, collected or reported.
//
// Streams: a block is cached for the stream it was allocated on. A block also
// used on other streams (record_stream) is reused only once events recorded
// on those streams at free time have completed.
//
// Configuration: PyTorch's device-generic AcceleratorAllocatorConfig parses
// PYTORCH_ALLOC_CONF (or the older PYTORCH_CUDA_ALLOC_CONF) and
// torch._C._accelerator_setAllocatorSettings; the cache reads it at each
// allocation, as CUDA's does. Honoured: max_split_size_mb (blocks that large
// are neither split nor handed to much smaller requests),
// max_non_split_rounding_mb, roundup_power2_divisions (OpenRegAllocatorSizes.h)
// and garbage_collection_threshold (OpenRegDeviceCacheSegments.cpp).
// expandable_segments:True is refused: the runtime cannot grow a mapping in
// place.
//
// Every member is guarded by the cache's mutex. Allocations and frees never
// take the GIL: they may run with or without it held by the caller. The one
// exception is memory history with Python stacks (OpenRegMemoryHistory.h),
// which gathers a stack before the lock is taken, as CUDA's allocator does.
//
// The methods live with their concern: block life cycle here and in
// OpenRegDeviceCache.cpp, segments in OpenRegDeviceCacheSegments.cpp,
// private pools in OpenRegMemPool.cpp, history and snapshots in
// OpenRegMemorySnapshot.cpp.
namespace c10::openreg {

// Hidden: the extension is compiled with -fPIC, where a member of default
// visibility may be interposed at load time, so GCC would not inline the
// small helpers of malloc and free (pool_insert, take_cached, ...) into them.
class __attribute__((visibility("hidden"))) DeviceCache {
 public:
  explicit DeviceCache(c10::DeviceIndex device) : device_(device) {}

  // A block of at least `requested` bytes for use on `stream`.
  Block* malloc(size_t requested, c10::Stream stream);
  // Caches the block again (once the streams that used it reach this point).
  void free(Block* block);
  void record_stream(Block* block, c10::Stream stream);

  // Returns every cached segment of the default pool (or of pool `id`) that
  // no live block uses to the runtime.
  void empty_cache(c10::MempoolId_t id);

  // Caps reserved memory at `fraction` of the device's capacity.
  void set_memory_fraction(double fraction, size_t capacity);
  double memory_fraction() const;

  // A holder (MemPool, use_mem_pool) starts or stops holding pool `id`.
  void retain_pool(c10::MempoolId_t id, bool no_split);
  void release_pool(c10::MempoolId_t id);
  int pool_use_count(c10::MempoolId_t id) const;

  void record_history(const HistoryOptions& options);
  // Appends this device's segments, in address order, with their blocks
  // (torch.cuda's layout: each segment's blocks cover it from its start),
  // and returns its recorded history, which then ends with a snapshot entry.
  std::vector<TraceEntry> snapshot(std::vector<c10::CachingDeviceAllocator::SegmentInfo>& segments);

  // Settles the size bins first, so statistics read as if every freed block
  // had merged at once (CUDA's inactive_split counts).
  c10::CachingDeviceAllocator::DeviceStats stats();
  void reset_accumulated_stats();
  void reset_peak_stats();

  // torch.openreg.caching_allocator_enable(False): a segment returns to the
  // runtime as soon as none of its blocks is in use. Process-wide.
  static bool caching_enabled() {
    return caching_enabled_.load(std::memory_order_relaxed);
  }
  static void set_caching_enabled(bool enabled) {
    caching_enabled_.store(enabled, std::memory_order_relaxed);
  }

 private:
  // Block life cycle (OpenRegDeviceCache.cpp).
  BlockPool& select_pool(size_t size);
  Block* take_cached(BlockPool& pool, size_t size, c10::Stream stream, size_t max_split_size);
  static bool should_split(const Block& block, size_t size, size_t max_split_size);
  void release_to_pool(Block* block);
  void merge_into_pool(Block* block);
  void release_if_unwanted(Block* block);
  void settle_bins();
  void pool_insert(Block* block);
  void pool_erase(Block* block);
  void process_events();
  void synchronize_pending();
  bool awaiting_event(const Block* block) const;

  // Segments (OpenRegDeviceCacheSegments.cpp).
  Block* new_segment(
      BlockPool& pool, size_t size, size_t requested, c10::Stream stream, size_t max_split_size,
      const std::shared_ptr<c10::GatheredContext>& context);
  orError_t runtime_malloc(void** ptr, size_t* bytes, size_t size);
  void collect_garbage();
  void release_cached(BlockPool& pool);
  void release_segment(Block* block);

  // Private pools (OpenRegMemPool.cpp).
  void drop_released_pools();

  // Streams appear in snapshots as their runtime handles (0 for the default
  // stream), as CUDA's appear as cudaStream_t values.
  static void* stream_handle(c10::Stream stream) {
    return OpenRegStream(stream).handle();
  }

  inline static std::atomic<bool> caching_enabled_{true};

  mutable std::mutex mutex_;
  c10::CachingDeviceAllocator::DeviceStats stats_;
  const c10::DeviceIndex device_;
  BlockPool small_{true};
  BlockPool large_{false};
  SizeBins bins_;  // freed blocks of small_, not yet merged
  std::deque<std::pair<std::unique_ptr<c10::Event>, Block*>> pending_;
  uint64_t cache_clock_ = 0;
  // Every segment by its base address, as its first block (for snapshots).
  std::map<size_t, Block*> segments_;
  std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>> private_pools_;
  DeviceMemoryHistory history_;
  double memory_fraction_ = 1.0;
  size_t allowed_bytes_ = std::numeric_limits<size_t>::max();
};

// The cache of `device` (validated), created with the allocator's first use.
DeviceCache& device_cache(c10::DeviceIndex device);

}  // namespace c10::openreg
