#pragma once

#include <cstdint>

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include "runtime/caching/OpenRegBlockPool.h"
#include "runtime/OpenRegFunctions.h"

// The caching allocator's statistics: c10's DeviceStats, with CUDA's names
// (allocated_bytes.all.current, reserved_bytes.small_pool.peak, ...), so
// torch.openreg.memory_stats() and torch.accelerator.memory.* read like their
// CUDA counterparts. Each device cache updates its own under its lock.
namespace c10::openreg {

// Calls fn(stat type index) for the aggregate and for the block's pool class
// (small or large), the two entries every change updates.
template <typename Fn>
void for_each_stat(const BlockPool& pool, Fn fn) {
  using c10::CachingAllocator::StatType;
  c10::CachingAllocator::StatTypes types{};
  types[static_cast<size_t>(StatType::AGGREGATE)] = true;
  types[static_cast<size_t>(pool.is_small ? StatType::SMALL_POOL : StatType::LARGE_POOL)] = true;
  c10::CachingAllocator::for_each_selected_stat_type(types, fn);
}

inline int64_t aggregate_allocated(const c10::CachingDeviceAllocator::DeviceStats& stats) {
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
}

inline int64_t aggregate_reserved(const c10::CachingDeviceAllocator::DeviceStats& stats) {
  return stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
}

// Tells an active torch.profiler (profile_memory=True) about an allocation
// (bytes > 0) or a free (bytes < 0), with the totals after it. Without an
// active profiler this is one thread-local lookup. Called from the deleter
// too, so it swallows errors instead of throwing.
inline void report_to_profiler(
    void* ptr, int64_t bytes, const c10::CachingDeviceAllocator::DeviceStats& stats, c10::DeviceIndex device) noexcept {
  try {
    c10::reportMemoryUsageToProfiler(
        ptr, bytes, static_cast<size_t>(aggregate_allocated(stats)), static_cast<size_t>(aggregate_reserved(stats)),
        make_device(device));
  } catch (...) {
    // A lost profiler record must not turn a free into a crash.
  }
}

// torch.openreg.reset_accumulated_memory_stats: the counters restart from 0
// (current values are kept).
void reset_accumulated_stats(c10::CachingDeviceAllocator::DeviceStats& stats);

// torch.openreg.reset_peak_memory_stats: every peak drops to its current value.
void reset_peak_stats(c10::CachingDeviceAllocator::DeviceStats& stats);

}  // namespace c10::openreg
