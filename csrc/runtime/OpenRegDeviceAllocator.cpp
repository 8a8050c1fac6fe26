// Device allocator: one runtime allocation per tensor storage (orMalloc /
// orFree), with CUDA-named statistics. Nothing is cached, so reserved bytes
// always equal allocated bytes and emptyCache has nothing to return.
#include "runtime/OpenRegDeviceAllocator.h"

#include <cstdio>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <c10/util/Exception.h>

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"

namespace c10::openreg {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingAllocator::StatType;

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

class OpenRegDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const DeviceIndex device = current_device();
    void* ptr = nullptr;
    if (nbytes > 0) {
      const orError_t err = orMalloc(&ptr, nbytes);
      if (err == orErrorMemoryAllocation) {
        raise_out_of_memory(device, nbytes);
      }
      OPENREG_CHECK(err);
      orPointerAttributes attributes{};
      OPENREG_CHECK(orPointerGetAttributes(&attributes, ptr));
      record_allocation(ptr, device, nbytes, attributes.allocationSize);
    }
    return {ptr, ptr, &free_device_memory, make_device(device)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_device_memory;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    OPENREG_CHECK(orMemcpy(dest, src, count, orMemcpyDeviceToDevice));
  }

  bool initialized() override {
    return true;
  }

  void emptyCache(MempoolId_t /*mempool_id*/) override {}

  void recordStream(const DataPtr& /*ptr*/, c10::Stream /*stream*/) override {
    // One stream per device: no cross-stream reuse to guard against.
  }

  DeviceStats getDeviceStats(DeviceIndex device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_for(device);
  }

  void resetAccumulatedStats(DeviceIndex device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& stats = stats_for(device);
    for (auto* array : stat_arrays(stats)) {
      for (auto& stat : *array) {
        stat.reset_accumulated();
      }
    }
    stats.num_alloc_retries = 0;
    stats.num_ooms = 0;
    stats.num_device_alloc = 0;
    stats.num_device_free = 0;
  }

  void resetPeakStats(DeviceIndex device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* array : stat_arrays(stats_for(device))) {
      for (auto& stat : *array) {
        stat.reset_peak();
      }
    }
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

  // Runs inside DataPtr deleters: must not throw and must not touch Python.
  void release(void* ptr) noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = blocks_.find(ptr);
      if (it != blocks_.end()) {
        const Block block = it->second;
        blocks_.erase(it);
        count(stats_[block.device], -1, block);
      }
    }
    const orError_t err = orFree(ptr);
    if (err != orSuccess) {
      std::fprintf(stderr, "openreg: orFree(%p) failed: %s\n", ptr, orGetLastErrorMessage());
    }
  }

 private:
  struct Block {
    DeviceIndex device;
    size_t requested;
    size_t size;
  };

  static constexpr size_t kAggregate = static_cast<size_t>(StatType::AGGREGATE);

  static std::vector<c10::CachingAllocator::StatArray*> stat_arrays(DeviceStats& s) {
    return {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
            &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes};
  }

  // There are no small/large pools and no caching: each allocation is its own
  // segment, and counts in the AGGREGATE slot only.
  static void count(DeviceStats& s, int sign, const Block& block) {
    auto apply = [sign](c10::CachingAllocator::Stat& stat, size_t amount) {
      sign > 0 ? stat.increase(amount) : stat.decrease(amount);
    };
    apply(s.allocation[kAggregate], 1);
    apply(s.segment[kAggregate], 1);
    apply(s.active[kAggregate], 1);
    apply(s.allocated_bytes[kAggregate], block.size);
    apply(s.reserved_bytes[kAggregate], block.size);
    apply(s.active_bytes[kAggregate], block.size);
    apply(s.requested_bytes[kAggregate], block.requested);
    (sign > 0 ? s.num_device_alloc : s.num_device_free) += 1;
  }

  DeviceStats& stats_for(DeviceIndex device) {
    check_device_index(device);
    if (stats_.size() <= static_cast<size_t>(device)) {
      stats_.resize(device + 1);
    }
    return stats_[device];
  }

  void record_allocation(void* ptr, DeviceIndex device, size_t requested, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Block block{device, requested, size};
    blocks_.emplace(ptr, block);
    count(stats_for(device), +1, block);
  }

  [[noreturn]] void raise_out_of_memory(DeviceIndex device, size_t nbytes) {
    const std::string detail = orGetLastErrorMessage();
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    (void)orMemGetInfo(&free_bytes, &total_bytes);
    size_t allocated = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      DeviceStats& stats = stats_for(device);
      stats.num_ooms += 1;
      allocated = stats.allocated_bytes[kAggregate].current;
    }
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        false,
        "openreg out of memory. Tried to allocate ",
        format_bytes(nbytes),
        " on openreg:",
        static_cast<int>(device),
        ", which has a total capacity of ",
        format_bytes(total_bytes),
        " of which ",
        format_bytes(free_bytes),
        " is free. PyTorch has ",
        format_bytes(allocated),
        " allocated (and reserved) on it. Set OPENREG_DEVICE_MEMORY to change the capacity. (",
        detail,
        ")");
  }

  static void free_device_memory(void* ptr);

  std::mutex mutex_;
  std::unordered_map<void*, Block> blocks_;
  std::vector<DeviceStats> stats_;
};

OpenRegDeviceAllocator g_allocator;

void OpenRegDeviceAllocator::free_device_memory(void* ptr) {
  g_allocator.release(ptr);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

} // namespace

c10::DeviceAllocator* getDeviceAllocator() {
  return &g_allocator;
}

} // namespace c10::openreg
