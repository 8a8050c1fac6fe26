// The caching allocator's front end, CUDA's NativeCachingAllocator: the
// c10::DeviceAllocator registered for PrivateUse1, which routes each request
// to the cache of the current device (OpenRegDeviceCache.h), keeps the live
// blocks by address for the deleter, and answers torch.openreg's allocator
// API. Its deleter takes no lock a forked child could find held, never throws,
// and touches Python only to report to the sanitizer while it is on.
#include "runtime/OpenRegDeviceAllocator.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <c10/core/AllocatorConfig.h>
#include <c10/util/flat_hash_map.h>

#include "runtime/caching/OpenRegDeviceCache.h"
#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGuard.h"
#include "runtime/OpenRegIpc.h"
#include "runtime/OpenRegPluggableAllocator.h"
#include "runtime/OpenRegStream.h"
#include "sanitizer/SanitizerTrace.h"

namespace c10::openreg {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;

class OpenRegDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    // A negative size converted to size_t (UntypedStorage(-1), resize_(-1))
    // must fail here, as on the CPU: rounding it up would wrap to a small
    // block while the storage went on to claim ~SIZE_MAX bytes. Any request
    // up to PTRDIFF_MAX rounds up without overflow.
    TORCH_CHECK(
        nbytes <= static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max()),
        "openreg allocator called with a negative number of bytes: ", static_cast<ptrdiff_t>(nbytes), " (", nbytes,
        " as size_t)");
    const DeviceIndex device = current_device();
    if (nbytes == 0) {
      return {nullptr, nullptr, &raw_delete, make_device(device)};
    }
    const c10::Stream stream = getCurrentOpenRegStream(device);
    Block* block = cache(device).malloc(nbytes, stream);
    remember(block);
    sanitizer::trace_noted_synchronization();
    poison(block);
    trace_allocation(block);
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
    sanitizer::trace_noted_synchronization();
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
    return cache(device).stats();
  }

  void resetAccumulatedStats(DeviceIndex device) override {
    cache(device).reset_accumulated_stats();
  }

  void resetPeakStats(DeviceIndex device) override {
    cache(device).reset_peak_stats();
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

  void set_memory_fraction(double fraction, DeviceIndex device) {
    TORCH_CHECK_VALUE(
        fraction > 0.0 && fraction <= 1.0, "Invalid fraction value: ", fraction,
        ". Allowed range: 0~1 (0 excluded) for openreg:", static_cast<int>(device));
    cache(device).set_memory_fraction(fraction, getMemoryInfo(device).second);
  }

  void* raw_alloc(size_t nbytes, c10::Stream stream) {
    if (nbytes == 0) {
      return nullptr;
    }
    const DeviceIndex device = stream.device_index();
    DeviceCache& device_cache = cache(device);
    const OpenRegGuard guard(device);  // the runtime allocates on the current device
    Block* block = device_cache.malloc(nbytes, stream);
    remember(block);
    sanitizer::trace_noted_synchronization();
    poison(block);
    trace_allocation(block);
    return block->ptr;
  }

  void raw_free(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    Block* block = forget(ptr);
    TORCH_CHECK_VALUE(
        block != nullptr, "caching_allocator_delete: ", ptr, " was not allocated by the openreg allocator");
    trace_deallocation(block);
    cache(block->stream.device_index()).free(block);
    sanitizer::trace_noted_synchronization();
  }

  std::optional<std::pair<size_t, c10::Stream>> allocated_block(void* ptr) {
    const Block* block = lookup(ptr);
    if (block == nullptr) {
      return std::nullopt;
    }
    return std::make_pair(block->size, block->stream);
  }

  DeviceCache& cache(DeviceIndex device) {
    // Every allocation and free comes here: once the caches exist, an index
    // below their count needs no further validation.
    if (C10_UNLIKELY(device < 0 || device >= cache_count_.load(std::memory_order_acquire))) {
      check_device_index(device);
      std::call_once(caches_once_, [this] {
        for (DeviceIndex i = 0; i < device_count(); ++i) {
          caches_.push_back(std::make_unique<DeviceCache>(i));
        }
        cache_count_.store(static_cast<DeviceIndex>(caches_.size()), std::memory_order_release);
      });
    }
    return *caches_[device];
  }

 private:
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

  // Under the sanitizer, every block handed out, fresh or reused, holds poison: 0xFF bytes, NaN in every floating
  // format and -1 in every signed integer. A GPU's memory holds whatever was there (compute-sanitizer's initcheck
  // assumes nothing of it), so a read before any write gives recognisable garbage every run, where the runtime's
  // fresh pages would read as zeros. Written in the block's stream order, as a memset on that stream would be.
  static void poison(const Block* block) {
    if (!sanitizer::enabled()) {
      return;
    }
    wait_for_stream(OpenRegStream(block->stream));
    void* host = nullptr;
    OPENREG_CHECK(orMemAccessBegin(block->ptr, block->size, &host));
    std::memset(host, 0xFF, block->size);
    OPENREG_CHECK(orMemAccessEnd(block->ptr));
  }

  // The sanitizer's trace of a block handed out and given back (SanitizerTrace.h), outside the cache's lock. Only
  // while the sanitizer is on does a free reach Python (its callbacks take the GIL), as CUDA's allocator does under
  // CUDA's sanitizer; the trace catches what the callbacks raise, so the deleter still never throws.
  static void trace_allocation(const Block* block) {
    sanitizer::trace([&](const auto& t) { t.trace_gpu_memory_allocation(c10::kPrivateUse1, uintptr_t(block->ptr)); });
  }
  static void trace_deallocation(const Block* block) noexcept {
    sanitizer::trace([&](const auto& t) { t.trace_gpu_memory_deallocation(c10::kPrivateUse1, uintptr_t(block->ptr)); });
  }

  std::once_flag caches_once_;
  std::vector<std::unique_ptr<DeviceCache>> caches_;
  std::atomic<DeviceIndex> cache_count_{0};  // caches_.size() once filled
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
  trace_deallocation(block);
  g_allocator.cache(block->stream.device_index()).free(block);
  sanitizer::trace_noted_synchronization();
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace

DeviceCache& device_cache(c10::DeviceIndex device) {
  return g_allocator.cache(device);
}

c10::DeviceAllocator* getDeviceAllocator() {
  if (c10::DeviceAllocator* pluggable = pluggableAllocator()) {
    return pluggable;  // change_current_allocator swapped it in
  }
  return &g_allocator;
}

std::optional<std::pair<size_t, c10::Stream>> allocatedBlock(void* ptr) {
  return g_allocator.allocated_block(ptr);
}

void setMemoryFraction(double fraction, c10::DeviceIndex device) {
  refuseIfPluggable("set_per_process_memory_fraction");
  g_allocator.set_memory_fraction(fraction, device);
}

double getMemoryFraction(c10::DeviceIndex device) {
  return g_allocator.cache(device).memory_fraction();
}

void* raw_alloc(size_t nbytes, c10::Stream stream) {
  if (pluggableAllocator() != nullptr) {
    return pluggableRawAlloc(nbytes, stream);
  }
  return g_allocator.raw_alloc(nbytes, stream);
}

void raw_free(void* ptr) {
  if (pluggableAllocator() != nullptr) {
    return pluggableRawFree(ptr);
  }
  g_allocator.raw_free(ptr);
}

void setCachingEnabled(bool enabled) {
  refuseIfPluggable("caching_allocator_enable");
  DeviceCache::set_caching_enabled(enabled);
  if (!enabled) {
    g_allocator.emptyCache({0, 0});
  }
}

bool cachingEnabled() {
  return DeviceCache::caching_enabled();
}

}  // namespace c10::openreg
