#include "runtime/caching/OpenRegAllocatorStats.h"

#include <array>

namespace c10::openreg {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingDeviceAllocator::DeviceStats;

std::array<StatArray*, 9> stat_arrays(DeviceStats& s) {
  return {&s.allocation,      &s.segment,        &s.active,       &s.inactive_split,
          &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes,
          &s.requested_bytes};
}

}  // namespace

void reset_accumulated_stats(DeviceStats& stats) {
  for (StatArray* array : stat_arrays(stats)) {
    for (Stat& stat : *array) {
      stat.reset_accumulated();
    }
  }
  stats.num_alloc_retries = 0;
  stats.num_ooms = 0;
  stats.num_device_alloc = 0;
  stats.num_device_free = 0;
}

void reset_peak_stats(DeviceStats& stats) {
  for (StatArray* array : stat_arrays(stats)) {
    for (Stat& stat : *array) {
      stat.reset_peak();
    }
  }
}

}  // namespace c10::openreg
