// A pluggable allocator: openreg device memory from a user's alloc/free pair,
// CUDAPluggableAllocator's contract. It owns no cache, so the caching
// allocator's statistics, snapshots, history, pools and IPC raise while it is
// current; emptyCache and recordStream have nothing to do.
#include "runtime/OpenRegPluggableAllocator.h"

#include <atomic>
#include <cstdio>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

namespace c10::openreg {
namespace {

// What free_fn needs back: the arguments the block was allocated with.
struct Allocation {
  ssize_t size;
  int device;
  orStream_t stream;
};

std::atomic<bool> g_caching_used{false};

class PluggableAllocator final : public c10::DeviceAllocator {
 public:
  PluggableAllocator(PluggableAllocFn alloc_fn, PluggableFreeFn free_fn) : alloc_fn_(alloc_fn), free_fn_(free_fn) {}

  c10::DataPtr allocate(size_t nbytes) override {
    const DeviceIndex device = current_device();
    if (nbytes == 0) {
      return {nullptr, nullptr, &raw_delete, make_device(device)};
    }
    void* ptr = malloc(nbytes, getCurrentOpenRegStream(device).unwrap());
    return {ptr, ptr, &raw_delete, make_device(device)};
  }

  void* malloc(size_t nbytes, c10::Stream stream) {
    // Same bound as the caching allocator: a negative size cast to size_t.
    TORCH_CHECK(
        nbytes <= static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max()),
        "openreg pluggable allocator called with a negative number of bytes: ", static_cast<ptrdiff_t>(nbytes));
    const int device = stream.device_index();
    const orStream_t handle = OpenRegStream(stream).handle();
    void* ptr = alloc_fn_(static_cast<ssize_t>(nbytes), device, handle);
    // The user's function reports failure with nullptr, as cudaMalloc-based
    // ones do; surface it as torch's out-of-memory error.
    TORCH_CHECK_WITH(
        OutOfMemoryError, ptr != nullptr, "openreg pluggable allocator: allocating ", nbytes, " bytes on device ",
        device, " failed (alloc function returned NULL)");
    std::lock_guard<std::mutex> lock(mutex_);
    allocations_[ptr] = Allocation{static_cast<ssize_t>(nbytes), device, handle};
    return ptr;
  }

  // False if ptr was not handed out here; never throws (deleters call it).
  bool free(void* ptr) noexcept {
    Allocation allocation{};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = allocations_.find(ptr);
      if (it == allocations_.end()) {
        return false;
      }
      allocation = it->second;
      allocations_.erase(it);
    }
    // Outside the lock: free_fn may itself be slow or allocate.
    free_fn_(ptr, allocation.size, allocation.device, allocation.stream);
    return true;
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &raw_delete;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    OPENREG_CHECK(orMemcpy(dest, src, count, orMemcpyDeviceToDevice));
  }

  // Installed means initialized, as in CUDA: a second swap is refused.
  bool initialized() override {
    return true;
  }

  // No cache to empty (CUDA calls an optional reset function, none here).
  void emptyCache(MempoolId_t /*mempool_id*/) override {}

  // The user's allocator decides stream reuse; nothing to record.
  void recordStream(const DataPtr& /*ptr*/, c10::Stream /*stream*/) override {}

  CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex /*device*/) override {
    unsupported("getDeviceStats");
  }

  void resetAccumulatedStats(c10::DeviceIndex /*device*/) override {
    unsupported("resetAccumulatedStats");
  }

  void resetPeakStats(c10::DeviceIndex /*device*/) override {
    unsupported("resetPeakStats");
  }

  [[noreturn]] static void unsupported(const char* what) {
    TORCH_CHECK(
        false, "OpenRegPluggableAllocator does not support ", what,
        " (it keeps no statistics or cache; the openreg caching allocator does)");
  }

 private:
  static void raw_delete(void* ptr);

  PluggableAllocFn alloc_fn_;
  PluggableFreeFn free_fn_;
  std::mutex mutex_;
  std::unordered_map<void*, Allocation> allocations_;
};

// Never replaced nor destroyed once set: tensors freed at exit still reach it.
std::atomic<PluggableAllocator*> g_pluggable{nullptr};
std::mutex g_swap_mutex;

void PluggableAllocator::raw_delete(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  PluggableAllocator* allocator = g_pluggable.load(std::memory_order_acquire);
  if (allocator == nullptr || !allocator->free(ptr)) {
    // A deleter must not throw.
    std::fprintf(stderr, "openreg: freeing %p, which the pluggable allocator did not allocate\n", ptr);
  }
}

}  // namespace

void markCachingAllocatorUsed() {
  g_caching_used.store(true, std::memory_order_relaxed);
}

void changeCurrentAllocator(PluggableAllocFn alloc_fn, PluggableFreeFn free_fn) {
  TORCH_CHECK_VALUE(alloc_fn != nullptr && free_fn != nullptr, "change_current_allocator: null alloc or free function");
  std::lock_guard<std::mutex> lock(g_swap_mutex);
  // CUDA's rule and message: only an allocator that has not started serving
  // memory may be replaced, or blocks would reach the wrong free function.
  TORCH_CHECK(g_pluggable.load() == nullptr && !g_caching_used.load(), "Can't swap an already initialized allocator");
  auto* allocator = new PluggableAllocator(alloc_fn, free_fn);
  g_pluggable.store(allocator, std::memory_order_release);
  // torch's own lookups (UntypedStorage, torch.accelerator.memory.*) use the
  // registry; same priority as REGISTER_ALLOCATOR, so this one wins.
  c10::SetAllocator(c10::DeviceType::PrivateUse1, allocator);
}

c10::DeviceAllocator* pluggableAllocator() {
  return g_pluggable.load(std::memory_order_acquire);
}

void refuseIfPluggable(const char* feature) {
  TORCH_CHECK(
      pluggableAllocator() == nullptr, feature,
      " needs openreg's caching allocator, but an OpenRegPluggableAllocator is current");
}

void* pluggableRawAlloc(size_t nbytes, c10::Stream stream) {
  if (nbytes == 0) {
    return nullptr;
  }
  return g_pluggable.load()->malloc(nbytes, stream);
}

void pluggableRawFree(void* ptr) {
  TORCH_CHECK(
      ptr == nullptr || g_pluggable.load()->free(ptr), "caching_allocator_delete: ", ptr,
      " was not allocated by the pluggable allocator");
}

}  // namespace c10::openreg
