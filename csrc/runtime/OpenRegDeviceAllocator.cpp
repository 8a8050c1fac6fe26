// The caching device allocator, modelled on CUDA's: freed blocks stay cached
// per device and per stream and serve later requests, so the runtime's
// orMalloc/orFree (a mapping update and page faults each) run only when the
// cache cannot serve a request. Statistics use CUDA's names, so
// torch.openreg.memory_stats() and torch.accelerator.memory.* read like their
// CUDA counterparts.
//
// Sizes: requests are rounded up to 512 bytes. Requests up to 1 MiB are
// "small" and carved from 2 MiB segments; up to 10 MiB are carved from 20 MiB
// segments; larger ones get a segment of their own rounded to 2 MiB. A cached
// block is split when the remainder is worth keeping, and freed neighbours
// within a segment merge again.
//
// Streams: a block is cached for the stream it was allocated on. A block also
// used on other streams (record_stream) is reused only once events recorded
// on those streams at free time have completed.
//
// Configuration: PyTorch's device-generic AcceleratorAllocatorConfig parses
// PYTORCH_ALLOC_CONF (or the older PYTORCH_CUDA_ALLOC_CONF) and
// torch._C._accelerator_setAllocatorSettings; this allocator reads it at each
// allocation, as CUDA's does. Honoured: max_split_size_mb (blocks that large
// are neither split nor handed to much smaller requests),
// max_non_split_rounding_mb, roundup_power2_divisions, and
// garbage_collection_threshold (with a per-process memory fraction: cached
// segments are returned, oldest first, once reserved memory passes that share
// of the allowed memory). expandable_segments:True is refused: the runtime
// cannot grow a mapping in place.
//
// Private pools (MemPool, use_mem_pool): a pool has its own small and large
// block pools on a device, so its blocks serve only its allocations; once
// released (its MemPool and every use of it gone), its cached segments return
// to the runtime, and so does each further segment as its last block is freed.
//
// set_per_process_memory_fraction caps the memory reserved on a device;
// allocating past it raises torch.OutOfMemoryError, as on CUDA.
//
// Deleters and allocations never take the GIL: they may run with or without
// it held by the caller. The one exception is memory history with Python
// stacks (OpenRegMemoryHistory.h), which gathers a stack before any lock is
// taken, as CUDA's allocator does.
#include "runtime/OpenRegDeviceAllocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include <c10/core/AllocatorConfig.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/flat_hash_map.h>

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegPluggableAllocator.h"
#include "runtime/OpenRegMemPool.h"
#include "runtime/OpenRegMemoryHistory.h"
#include "runtime/OpenRegIpc.h"
#include "runtime/OpenRegStream.h"

namespace c10::openreg {
namespace {

using c10::CachingAllocator::AcceleratorAllocatorConfig;
using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingAllocator::StatTypes;
using c10::CachingDeviceAllocator::BlockInfo;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::SegmentInfo;

constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = 1 << 20;
constexpr size_t kSmallBuffer = 2 << 20;
constexpr size_t kMinLargeAlloc = 10 << 20;
constexpr size_t kLargeBuffer = 20 << 20;
constexpr size_t kRoundLarge = 2 << 20;

// torch.openreg.caching_allocator_enable(False): freed memory is not kept.
std::atomic<bool> g_caching_enabled{true};

std::string format_bytes(size_t bytes) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed;
  if (bytes < 1024) {
    os << bytes << " bytes";
  } else if (bytes < (1 << 20)) {
    os << bytes / 1024.0 << " KiB";
  } else if (bytes < (1 << 30)) {
    os << bytes / 1048576.0 << " MiB";
  } else {
    os << bytes / 1073741824.0 << " GiB";
  }
  return os.str();
}

// roundup_power2_divisions: the power-of-two interval holding `size` is cut
// into `divisions` equal steps, and the size rounds up to the next step
// (fewer distinct sizes, so cached blocks are reused more often).
size_t round_to_power2_division(size_t size, size_t divisions) {
  // size > kMinBlockSize * divisions, so a step is a multiple of kMinBlockSize.
  const size_t step = c10::llvm::PowerOf2Floor(size) / divisions;
  return (size + step - 1) / step * step;
}

size_t round_size(size_t size) {
  if (size < kMinBlockSize) {
    return kMinBlockSize;
  }
  const size_t divisions = AcceleratorAllocatorConfig::roundup_power2_divisions(size);
  if (divisions > 1 && size > kMinBlockSize * divisions) {
    return round_to_power2_division(size, divisions);
  }
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

size_t segment_size(size_t size) {
  if (size <= kSmallSize) {
    return kSmallBuffer;
  }
  if (size < kMinLargeAlloc) {
    return kLargeBuffer;
  }
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

struct BlockPool;

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  size_t requested_size = 0;
  c10::Stream stream;
  BlockPool* pool = nullptr;
  bool allocated = false;
  // Neighbours within the same segment (nullptr at its ends).
  Block* prev = nullptr;
  Block* next = nullptr;
  // In its pool's set of cached blocks (not allocated, not awaiting events).
  bool cached = false;
  // Allocated while at least max_split_size (counted in oversize_allocations
  // until freed, whatever the setting is by then).
  bool oversize = false;
  // When it entered the cache (a per-device counter): garbage collection
  // returns the longest-cached segments first.
  uint64_t cached_at = 0;
  // Streams other than `stream` that used the block (record_stream).
  ska::flat_hash_set<c10::Stream> stream_uses;

  Block(void* ptr, size_t size, c10::Stream stream, BlockPool* pool)
      : ptr(ptr), size(size), stream(stream), pool(pool) {}

  bool is_split() const {
    return prev != nullptr || next != nullptr;
  }
};

// Free blocks, ordered so that lower_bound finds the smallest block of a
// stream that fits.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) {
      return a->stream.id() != b->stream.id() ? a->stream.id() < b->stream.id()
                                              : a->stream.device_index() < b->stream.device_index();
    }
    if (a->size != b->size) {
      return a->size < b->size;
    }
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};

struct PrivatePool;

struct BlockPool {
  explicit BlockPool(bool small, PrivatePool* owner = nullptr) : is_small(small), owner(owner) {}
  std::set<Block*, BlockOrder> blocks;
  const bool is_small;
  PrivatePool* const owner;  // nullptr for the device's default pool
};

// The blocks of one memory pool on one device.
struct PrivatePool {
  PrivatePool(c10::MempoolId_t id, bool no_split) : id(id), no_split(no_split) {}
  const c10::MempoolId_t id;
  const bool no_split;  // MemPool(no_split=True): a segment serves one allocation
  BlockPool small{true, this};
  BlockPool large{false, this};
  int use_count = 0;    // MemPool objects and active use_mem_pool contexts
  size_t segments = 0;  // held from the runtime
};

// The cache of one device. Every member is guarded by `mutex`.
class DeviceCache {
 public:
  explicit DeviceCache(DeviceIndex device) : device_(device) {}

  Block* malloc(size_t requested, c10::Stream stream) {
    // Before the lock: gathering a Python stack takes the GIL.
    std::shared_ptr<c10::GatheredContext> context = gather_context(RecordContext::STATE);
    std::lock_guard<std::mutex> lock(mutex);
    process_events();
    const size_t size = round_size(requested);
    BlockPool& pool = select_pool(size);
    const size_t max_split_size = AcceleratorAllocatorConfig::max_split_size();
    Block* block = take_cached(pool, size, stream, max_split_size);
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
      stats.oversize_allocations.increase(1);
    }
    for_each_stat(pool, [&](size_t t) {
      stats.allocation[t].increase(1);
      stats.allocated_bytes[t].increase(block->size);
      stats.active[t].increase(1);
      stats.active_bytes[t].increase(block->size);
      stats.requested_bytes[t].increase(requested);
    });
    report_to_profiler(block->ptr, static_cast<int64_t>(block->size));
    if (history_.recording()) {
      history_.record(TraceEntry::ALLOC, device_, address(block), requested, stream_handle(stream), context);
      history_.set_block_context(block->ptr, std::move(context));
    }
    return block;
  }

  void free(Block* block) {
    // Before the lock, as in malloc.
    std::shared_ptr<c10::GatheredContext> context = gather_context(RecordContext::ALL);
    std::lock_guard<std::mutex> lock(mutex);
    if (history_.recording()) {
      history_.record(
          TraceEntry::FREE_REQUESTED,
          device_,
          address(block),
          block->requested_size,
          stream_handle(block->stream),
          context != nullptr ? std::move(context) : history_.block_context(block->ptr));
    }
    block->allocated = false;
    if (block->oversize) {
      stats.oversize_allocations.decrease(1);
    }
    for_each_stat(*block->pool, [&](size_t t) {
      stats.allocation[t].decrease(1);
      stats.allocated_bytes[t].decrease(block->size);
      stats.requested_bytes[t].decrease(block->requested_size);
    });
    report_to_profiler(block->ptr, -static_cast<int64_t>(block->size));
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
    release_to_pool(block);
  }

  void record_stream(Block* block, c10::Stream stream) {
    std::lock_guard<std::mutex> lock(mutex);
    if (stream != block->stream) {
      block->stream_uses.insert(stream);
    }
  }

  // Returns every cached segment of the default pool (or of pool `id`) that
  // no live block uses to the runtime.
  void empty_cache(c10::MempoolId_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    synchronize_pending();
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

  // A MemPool (or a use of one) starts holding pool `id` on this device.
  void retain_pool(c10::MempoolId_t id, bool no_split) {
    std::lock_guard<std::mutex> lock(mutex);
    auto& pool = private_pools_[id];
    if (pool == nullptr) {
      pool = std::make_unique<PrivatePool>(id, no_split);
    }
    pool->use_count += 1;
  }

  // The last holder gone, the pool's cached segments return to the runtime;
  // segments still in use follow as their blocks are freed.
  void release_pool(c10::MempoolId_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = private_pools_.find(id);
    TORCH_CHECK(
        it != private_pools_.end() && it->second->use_count > 0, "openreg: memory pool (", id.first, ", ",
        id.second, ") is not held on openreg:", static_cast<int>(device_));
    PrivatePool& pool = *it->second;
    if (--pool.use_count == 0) {
      synchronize_pending();
      release_cached(pool.small);
      release_cached(pool.large);
      drop_released_pools();
    }
  }

  int pool_use_count(c10::MempoolId_t id) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = private_pools_.find(id);
    return it == private_pools_.end() ? 0 : it->second->use_count;
  }

  // Caps reserved memory at `fraction` of the device's capacity.
  void set_memory_fraction(double fraction, size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex);
    memory_fraction_ = fraction;
    allowed_bytes_ = static_cast<size_t>(fraction * static_cast<double>(capacity));
  }

  double memory_fraction() const {
    std::lock_guard<std::mutex> lock(mutex);
    return memory_fraction_;
  }

  void record_history(const HistoryOptions& options) {
    std::lock_guard<std::mutex> lock(mutex);
    history_.configure(options);
  }

  // Appends this device's segments, in address order, with their blocks
  // (torch.cuda's layout: each segment's blocks cover it from its start),
  // and returns its recorded history, which then ends with a snapshot entry.
  std::vector<TraceEntry> snapshot(std::vector<SegmentInfo>& segments) {
    std::lock_guard<std::mutex> lock(mutex);
    size_t active_bytes = 0;
    for (const auto& [base, head] : segments_) {
      SegmentInfo& segment = segments.emplace_back();
      segment.device = device_;
      segment.address = base;
      segment.stream = stream_handle(head->stream);
      segment.is_large = !head->pool->is_small;
      if (head->pool->owner != nullptr) {
        segment.owner_private_pool_id = head->pool->owner->id;
      }
      segment.context_when_allocated = history_.segment_context(head->ptr);
      for (const Block* block = head; block != nullptr; block = block->next) {
        BlockInfo& info = segment.blocks.emplace_back();
        info.size = block->size;
        info.allocated = block->allocated;
        // Neither allocated nor cached: freed, awaiting another stream's events.
        info.active = block->allocated || !block->cached;
        segment.total_size += block->size;
        if (info.active) {
          info.requested_size = block->requested_size;
          info.context_when_allocated = history_.block_context(block->ptr);
          segment.active_size += block->size;
        }
        if (info.allocated) {
          segment.allocated_size += block->size;
          segment.requested_size += block->requested_size;
        }
      }
      active_bytes += segment.active_size;
    }
    history_.record(TraceEntry::SNAPSHOT, device_, 0, active_bytes, nullptr, nullptr);
    return history_.trace();
  }

  mutable std::mutex mutex;
  DeviceStats stats;

 private:
  // Tells an active torch.profiler (profile_memory=True) about an allocation
  // (bytes > 0) or a free (bytes < 0), with the totals after it. Without an
  // active profiler this is one thread-local lookup. Called from the deleter
  // too, so it swallows errors instead of throwing.
  void report_to_profiler(void* ptr, int64_t bytes) const noexcept {
    constexpr auto kAggregate = static_cast<size_t>(StatType::AGGREGATE);
    try {
      c10::reportMemoryUsageToProfiler(
          ptr,
          bytes,
          static_cast<size_t>(stats.allocated_bytes[kAggregate].current),
          static_cast<size_t>(stats.reserved_bytes[kAggregate].current),
          make_device(device_));
    } catch (...) {
      // A lost profiler record must not turn a free into a crash.
    }
  }

  template <typename Fn>
  static void for_each_stat(const BlockPool& pool, Fn fn) {
    StatTypes types{};
    types[static_cast<size_t>(StatType::AGGREGATE)] = true;
    types[static_cast<size_t>(pool.is_small ? StatType::SMALL_POOL : StatType::LARGE_POOL)] = true;
    c10::CachingAllocator::for_each_selected_stat_type(types, fn);
  }

  // Requests of max_split_size or more are never split, so that large
  // blocks are not fragmented by small requests.
  static bool should_split(const Block& block, size_t size, size_t max_split_size) {
    if (block.pool->owner != nullptr && block.pool->owner->no_split) {
      return false;
    }
    const size_t remaining = block.size - size;
    return block.pool->is_small ? remaining >= kMinBlockSize : size < max_split_size && remaining > kSmallSize;
  }

  // The smallest cached block of `stream` that fits, if any. An oversize
  // block (max_split_size or more) serves only a request of that class
  // within max_non_split_rounding_mb of it; blocks later in the order are
  // larger still, so the first candidate decides.
  Block* take_cached(BlockPool& pool, size_t size, c10::Stream stream, size_t max_split_size) {
    Block key(nullptr, size, stream, &pool);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) {
      return nullptr;
    }
    Block* block = *it;
    if (block->size >= max_split_size &&
        (size < max_split_size ||
         block->size - size >= AcceleratorAllocatorConfig::max_non_split_rounding_size())) {
      return nullptr;
    }
    pool_erase(block);
    return block;
  }

  // The pool this thread allocates from (use_mem_pool), else the default.
  BlockPool& select_pool(size_t size) {
    const bool small = size <= kSmallSize;
    if (const std::optional<c10::MempoolId_t> id = pool_for_current_thread(device_)) {
      auto it = private_pools_.find(*id);
      TORCH_INTERNAL_ASSERT(it != private_pools_.end(), "openreg: allocating to a memory pool nobody holds");
      return small ? it->second->small : it->second->large;
    }
    return small ? small_ : large_;
  }

  // Forgets released pools that no longer hold memory.
  void drop_released_pools() {
    std::erase_if(private_pools_, [](const auto& entry) {
      return entry.second->use_count == 0 && entry.second->segments == 0;
    });
  }

  static size_t address(const Block* block) {
    return reinterpret_cast<size_t>(block->ptr);
  }

  // Streams appear in snapshots as their runtime handles (0 for the default
  // stream), as CUDA's appear as cudaStream_t values.
  static void* stream_handle(c10::Stream stream) {
    return OpenRegStream(stream).handle();
  }

  Block* new_segment(
      BlockPool& pool,
      size_t size,
      size_t requested,
      c10::Stream stream,
      size_t max_split_size,
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
      stats.num_alloc_retries += 1;
      synchronize_pending();
      release_cached(small_);
      release_cached(large_);
      bytes = segment_size(size);
      err = runtime_malloc(&ptr, &bytes, size);
    }
    if (err == orErrorMemoryAllocation) {
      stats.num_ooms += 1;
      if (history_.recording()) {
        size_t free_bytes = 0;
        size_t total_bytes = 0;
        (void)orMemGetInfo(&free_bytes, &total_bytes);
        history_.record(TraceEntry::OOM, device_, free_bytes, requested, stream_handle(stream), context);
      }
      raise_out_of_memory(requested, size);
    }
    OPENREG_CHECK(err);
    stats.num_device_alloc += 1;
    if (bytes >= max_split_size) {
      stats.oversize_segments.increase(1);
    }
    for_each_stat(pool, [&](size_t t) {
      stats.segment[t].increase(1);
      stats.reserved_bytes[t].increase(bytes);
    });
    auto* segment = new Block(ptr, bytes, stream, &pool);
    segments_.emplace(address(segment), segment);
    if (pool.owner != nullptr) {
      pool.owner->segments += 1;
    }
    if (history_.recording()) {
      history_.record(TraceEntry::SEGMENT_ALLOC, device_, address(segment), bytes, stream_handle(stream), context);
      history_.set_segment_context(ptr, context);
    }
    return segment;
  }

  // Asks for a whole segment of *bytes; when the device (or the memory
  // fraction) cannot hold that much but can hold the request itself (a small
  // or nearly full device), settles for a segment of exactly `size`, updating
  // *bytes. Past the memory fraction, fails as the runtime does when full.
  orError_t runtime_malloc(void** ptr, size_t* bytes, size_t size) {
    markCachingAllocatorUsed(); // the allocator can no longer be swapped
    const auto reserved = static_cast<size_t>(stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current);
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
  void collect_garbage() {
    const double threshold = AcceleratorAllocatorConfig::garbage_collection_threshold();
    if (threshold <= 0.0 || memory_fraction_ >= 1.0) {
      return;
    }
    const auto target = static_cast<size_t>(threshold * static_cast<double>(allowed_bytes_));
    const auto reserved = [&] { return stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current; };
    if (static_cast<size_t>(reserved()) <= target) {
      return;
    }
    std::vector<Block*> segments;
    for (BlockPool* pool : {&small_, &large_}) {
      for (Block* block : pool->blocks) {
        if (!block->is_split()) {
          segments.push_back(block);
        }
      }
    }
    std::sort(segments.begin(), segments.end(), [](const Block* a, const Block* b) { return a->cached_at < b->cached_at; });
    for (Block* block : segments) {
      if (static_cast<size_t>(reserved()) <= target) {
        break;
      }
      block->pool->blocks.erase(block);
      release_segment(block);
    }
  }

  // `size` is the rounded request: past the memory fraction, that is what
  // the fraction could not hold, and the runtime itself was never asked.
  [[noreturn]] void raise_out_of_memory(size_t requested, size_t size) {
    const std::string detail = orGetLastErrorMessage();
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    (void)orMemGetInfo(&free_bytes, &total_bytes);
    const auto aggregate = static_cast<size_t>(StatType::AGGREGATE);
    const auto allocated = static_cast<size_t>(stats.allocated_bytes[aggregate].current);
    const auto reserved = static_cast<size_t>(stats.reserved_bytes[aggregate].current);
    const bool fraction_set = memory_fraction_ < 1.0;
    std::ostringstream allowed;
    allowed << ",";
    if (fraction_set) {
      allowed << " with " << format_bytes(allowed_bytes_) << " allowed (set_per_process_memory_fraction("
              << memory_fraction_ << "));";
    }
    const std::string advice = fraction_set && reserved + size > allowed_bytes_
        ? " Raise the per-process memory fraction or free tensors."
        : " Set OPENREG_DEVICE_MEMORY to change the capacity. (" + detail + ")";
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        false,
        "openreg out of memory. Tried to allocate ",
        format_bytes(requested),
        ". openreg:",
        static_cast<int>(device_),
        " has a total capacity of ",
        format_bytes(total_bytes),
        " of which ",
        format_bytes(free_bytes),
        " is free. Of the allocated memory ",
        format_bytes(allocated),
        " is allocated by PyTorch",
        allowed.str(),
        " and ",
        format_bytes(reserved - allocated),
        " is reserved by PyTorch but unallocated.",
        advice);
  }

  // A freed block goes back to its pool, merged with free neighbours.
  void release_to_pool(Block* block) {
    if (history_.recording()) {
      history_.record(
          TraceEntry::FREE_COMPLETED,
          device_,
          address(block),
          block->requested_size,
          stream_handle(block->stream),
          history_.block_context(block->ptr));
    }
    history_.forget_block(block->ptr);
    BlockPool& pool = *block->pool;
    const size_t original_size = block->size;
    for (Block* neighbour : {block->prev, block->next}) {
      if (neighbour == nullptr || !neighbour->cached) {
        continue;  // in use, or freed but still awaiting other streams
      }
      pool_erase(neighbour);
      if (neighbour == block->prev) {
        block->ptr = neighbour->ptr;
        block->prev = neighbour->prev;
        if (block->prev != nullptr) {
          block->prev->next = block;
        } else {
          segments_[address(block)] = block;  // the segment's new first block
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
    for_each_stat(pool, [&](size_t t) {
      stats.active[t].decrease(1);
      stats.active_bytes[t].decrease(original_size);
    });
    // The last block of a segment that is not to be cached (caching disabled,
    // or a released pool's): the segment goes too.
    const bool keep = g_caching_enabled.load(std::memory_order_relaxed) &&
        (pool.owner == nullptr || pool.owner->use_count > 0);
    if (!keep && !block->is_split()) {
      pool_erase(block);
      release_segment(block);
      drop_released_pools();
    }
  }

  void release_cached(BlockPool& pool) {
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
  void release_segment(Block* block) {
    OPENREG_CHECK(orFree(block->ptr));
    segments_.erase(address(block));
    if (history_.recording()) {
      history_.record(
          TraceEntry::SEGMENT_FREE,
          device_,
          address(block),
          block->size,
          stream_handle(block->stream),
          history_.segment_context(block->ptr));
    }
    history_.forget_segment(block->ptr);
    if (block->pool->owner != nullptr) {
      block->pool->owner->segments -= 1;
    }
    stats.num_device_free += 1;
    if (block->size >= AcceleratorAllocatorConfig::max_split_size()) {
      stats.oversize_segments.decrease(1);
    }
    for_each_stat(*block->pool, [&](size_t t) {
      stats.segment[t].decrease(1);
      stats.reserved_bytes[t].decrease(block->size);
    });
    delete block;
  }

  // Pool membership changes only here. A cached block that shares its
  // segment with other blocks is "inactive split": it cannot be returned to
  // the runtime until its neighbours are free.
  void pool_insert(Block* block) {
    block->pool->blocks.insert(block);
    block->cached = true;
    block->cached_at = ++cache_clock_;
    if (block->is_split()) {
      for_each_stat(*block->pool, [&](size_t t) {
        stats.inactive_split[t].increase(1);
        stats.inactive_split_bytes[t].increase(block->size);
      });
    }
  }

  void pool_erase(Block* block) {
    block->pool->blocks.erase(block);
    block->cached = false;
    if (block->is_split()) {
      for_each_stat(*block->pool, [&](size_t t) {
        stats.inactive_split[t].decrease(1);
        stats.inactive_split_bytes[t].decrease(block->size);
      });
    }
  }

  // Blocks freed while other streams still used them return to the pool once
  // every event recorded for them has completed.
  void process_events() {
    while (!pending_.empty() && pending_.front().first->query()) {
      Block* block = pending_.front().second;
      pending_.pop_front();
      if (!awaiting_event(block)) {
        release_to_pool(block);
      }
    }
  }

  void synchronize_pending() {
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

  bool awaiting_event(const Block* block) const {
    for (const auto& entry : pending_) {
      if (entry.second == block) {
        return true;
      }
    }
    return false;
  }

  const DeviceIndex device_;
  BlockPool small_{true};
  BlockPool large_{false};
  std::deque<std::pair<std::unique_ptr<c10::Event>, Block*>> pending_;
  uint64_t cache_clock_ = 0;
  // Every segment by its base address, as its first block (for snapshots).
  std::map<size_t, Block*> segments_;
  std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>> private_pools_;
  DeviceMemoryHistory history_;
  double memory_fraction_ = 1.0;
  size_t allowed_bytes_ = std::numeric_limits<size_t>::max();
};

class OpenRegDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    // A negative size converted to size_t (UntypedStorage(-1), resize_(-1))
    // must fail here, as on the CPU: rounding it up would wrap to a small
    // block while the storage went on to claim ~SIZE_MAX bytes. Any request
    // up to PTRDIFF_MAX rounds up without overflow.
    TORCH_CHECK(
        nbytes <= static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max()),
        "openreg allocator called with a negative number of bytes: ",
        static_cast<ptrdiff_t>(nbytes),
        " (",
        nbytes,
        " as size_t)");
    const DeviceIndex device = current_device();
    if (nbytes == 0) {
      return {nullptr, nullptr, &raw_delete, make_device(device)};
    }
    const c10::Stream stream = getCurrentOpenRegStream(device);
    Block* block = cache(device).malloc(nbytes, stream);
    remember(block);
    return {block->ptr, block->ptr, &raw_delete, make_device(device)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &raw_delete;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    OPENREG_CHECK(orMemcpy(dest, src, count, orMemcpyDeviceToDevice));
  }

  bool initialized() override {
    return true;
  }

  void emptyCache(MempoolId_t mempool_id) override {
    for (DeviceIndex i = 0; i < device_count(); ++i) {
      cache(i).empty_cache(mempool_id);
    }
  }

  void retain_pool(DeviceIndex device, c10::MempoolId_t id, bool no_split) {
    cache(device).retain_pool(id, no_split);
  }

  void release_pool(DeviceIndex device, c10::MempoolId_t id) {
    cache(device).release_pool(id);
  }

  int pool_use_count(DeviceIndex device, c10::MempoolId_t id) {
    return cache(device).pool_use_count(id);
  }

  void recordStream(const DataPtr& data, c10::Stream stream) override {
    // Memory received from another process is not this cache's to hold back;
    // CUDA's allocator ignores it too.
    if (data.get() == nullptr || is_received(data)) {
      return;
    }
    Block* block = lookup(data.get());
    TORCH_CHECK(block != nullptr, "record_stream: pointer ", data.get(), " was not allocated by openreg");
    cache(block->stream.device_index()).record_stream(block, stream);
  }

  DeviceStats getDeviceStats(DeviceIndex device) override {
    DeviceCache& c = cache(device);
    std::lock_guard<std::mutex> lock(c.mutex);
    DeviceStats stats = c.stats;
    stats.max_split_size = static_cast<int64_t>(AcceleratorAllocatorConfig::max_split_size());
    return stats;
  }

  void resetAccumulatedStats(DeviceIndex device) override {
    DeviceCache& c = cache(device);
    std::lock_guard<std::mutex> lock(c.mutex);
    for (StatArray* array : stat_arrays(c.stats)) {
      for (Stat& stat : *array) {
        stat.reset_accumulated();
      }
    }
    c.stats.num_alloc_retries = 0;
    c.stats.num_ooms = 0;
    c.stats.num_device_alloc = 0;
    c.stats.num_device_free = 0;
  }

  void resetPeakStats(DeviceIndex device) override {
    DeviceCache& c = cache(device);
    std::lock_guard<std::mutex> lock(c.mutex);
    for (StatArray* array : stat_arrays(c.stats)) {
      for (Stat& stat : *array) {
        stat.reset_peak();
      }
    }
  }

  void set_memory_fraction(double fraction, DeviceIndex device) {
    TORCH_CHECK_VALUE(
        fraction > 0.0 && fraction <= 1.0,
        "Invalid fraction value: ", fraction, ". Allowed range: 0~1 (0 excluded) for openreg:", static_cast<int>(device));
    cache(device).set_memory_fraction(fraction, getMemoryInfo(device).second);
  }

  double memory_fraction(DeviceIndex device) {
    return cache(device).memory_fraction();
  }

  void record_history(const HistoryOptions& options) {
    set_history_gathering(options);
    for (DeviceIndex i = 0; i < device_count(); ++i) {
      cache(i).record_history(options);
    }
  }

  MemorySnapshot snapshot() {
    MemorySnapshot result;
    for (DeviceIndex i = 0; i < device_count(); ++i) {
      result.device_traces.push_back(cache(i).snapshot(result.segments));
    }
    return result;
  }

  void* raw_alloc(size_t nbytes, c10::Stream stream) {
    if (nbytes == 0) {
      return nullptr;
    }
    const DeviceIndex device = stream.device_index();
    DeviceCache& device_cache = cache(device);
    const c10::DeviceGuard guard(make_device(device));  // the runtime allocates on the current device
    Block* block = device_cache.malloc(nbytes, stream);
    remember(block);
    return block->ptr;
  }

  void raw_free(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    Block* block = forget(ptr);
    TORCH_CHECK_VALUE(block != nullptr, "caching_allocator_delete: ", ptr, " was not allocated by the openreg allocator");
    cache(block->stream.device_index()).free(block);
  }

  std::pair<size_t, size_t> getMemoryInfo(DeviceIndex device) override {
    const DeviceIndex previous = exchange_device(device);
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    const orError_t err = orMemGetInfo(&free_bytes, &total_bytes);
    set_device(previous);
    OPENREG_CHECK(err);
    return {free_bytes, total_bytes};
  }

 private:
  static std::vector<StatArray*> stat_arrays(DeviceStats& s) {
    return {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
            &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes};
  }

  DeviceCache& cache(DeviceIndex device) {
    check_device_index(device);
    std::call_once(caches_once_, [this] {
      for (DeviceIndex i = 0; i < device_count(); ++i) {
        caches_.push_back(std::make_unique<DeviceCache>(i));
      }
    });
    return *caches_[device];
  }

  // Live blocks by address, sharded so that threads freeing unrelated
  // tensors rarely contend.
  struct Shard {
    std::mutex mutex;
    ska::flat_hash_map<void*, Block*> blocks;
  };
  static constexpr size_t kShards = 16;

  Shard& shard(void* ptr) {
    return shards_[(reinterpret_cast<uintptr_t>(ptr) >> 9) % kShards];
  }

  void remember(Block* block) {
    Shard& s = shard(block->ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.blocks.emplace(block->ptr, block);
  }

  Block* lookup(void* ptr) {
    Shard& s = shard(ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.blocks.find(ptr);
    return it == s.blocks.end() ? nullptr : it->second;
  }

  Block* forget(void* ptr) {
    Shard& s = shard(ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.blocks.find(ptr);
    if (it == s.blocks.end()) {
      return nullptr;
    }
    Block* block = it->second;
    s.blocks.erase(it);
    return block;
  }

  static void raw_delete(void* ptr);

  std::once_flag caches_once_;
  std::vector<std::unique_ptr<DeviceCache>> caches_;
  std::array<Shard, kShards> shards_;
};

OpenRegDeviceAllocator g_allocator;

void OpenRegDeviceAllocator::raw_delete(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  // In a child forked after openreg started, the runtime refuses service and
  // the memory belongs to the parent: freeing is a no-op, as with CUDA. Asked
  // before taking any lock, which a parent thread may have held at the fork.
  if (device_count_ensure_non_throwing() == 0) {
    return;
  }
  Block* block = g_allocator.forget(ptr);
  if (block == nullptr) {
    // A deleter must not throw.
    std::fprintf(stderr, "openreg: freeing %p, which the openreg allocator did not allocate\n", ptr);
    return;
  }
  g_allocator.cache(block->stream.device_index()).free(block);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

} // namespace

c10::DeviceAllocator* getDeviceAllocator() {
  if (c10::DeviceAllocator* pluggable = pluggableAllocator()) {
    return pluggable; // change_current_allocator swapped it in
  }
  return &g_allocator;
}

void setMemoryFraction(double fraction, c10::DeviceIndex device) {
  refuseIfPluggable("set_per_process_memory_fraction");
  g_allocator.set_memory_fraction(fraction, device);
}

double getMemoryFraction(c10::DeviceIndex device) {
  return g_allocator.memory_fraction(device);
}

void* raw_alloc(size_t nbytes, c10::Stream stream) {
  if (pluggableAllocator() != nullptr) {
    return pluggableRawAlloc(nbytes, stream);
  }
  return g_allocator.raw_alloc(nbytes, stream);
}

void setCachingEnabled(bool enabled) {
  refuseIfPluggable("caching_allocator_enable");
  g_caching_enabled.store(enabled, std::memory_order_relaxed);
  if (!enabled) {
    g_allocator.emptyCache({0, 0});
  }
}

bool cachingEnabled() {
  return g_caching_enabled.load(std::memory_order_relaxed);
}

void recordMemoryHistory(const HistoryOptions& options) {
  refuseIfPluggable("_record_memory_history");
  g_allocator.record_history(options);
}

MemorySnapshot memorySnapshot() {
  refuseIfPluggable("memory snapshots");
  return g_allocator.snapshot();
}

void retainMemPool(c10::DeviceIndex device, c10::MempoolId_t id, bool no_split) {
  refuseIfPluggable("MemPool");
  g_allocator.retain_pool(device, id, no_split);
}

void releaseMemPool(c10::DeviceIndex device, c10::MempoolId_t id) {
  g_allocator.release_pool(device, id);
}

int memPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t id) {
  return g_allocator.pool_use_count(device, id);
}

void raw_free(void* ptr) {
  if (pluggableAllocator() != nullptr) {
    return pluggableRawFree(ptr);
  }
  g_allocator.raw_free(ptr);
}

} // namespace c10::openreg
