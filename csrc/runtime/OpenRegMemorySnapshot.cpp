#include "runtime/OpenRegMemorySnapshot.h"

#include "runtime/caching/OpenRegDeviceCache.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegPluggableAllocator.h"

namespace c10::openreg {

using c10::CachingDeviceAllocator::BlockInfo;
using c10::CachingDeviceAllocator::SegmentInfo;

void recordMemoryHistory(const HistoryOptions& options) {
  refuseIfPluggable("_record_memory_history");
  set_history_gathering(options);
  for (DeviceIndex i = 0; i < device_count(); ++i) {
    device_cache(i).record_history(options);
  }
}

MemorySnapshot memorySnapshot() {
  refuseIfPluggable("memory snapshots");
  MemorySnapshot result;
  for (DeviceIndex i = 0; i < device_count(); ++i) {
    result.device_traces.push_back(device_cache(i).snapshot(result.segments));
  }
  return result;
}

void DeviceCache::record_history(const HistoryOptions& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  history_.configure(options);
}

std::vector<TraceEntry> DeviceCache::snapshot(std::vector<SegmentInfo>& segments) {
  std::lock_guard<std::mutex> lock(mutex_);
  settle_bins();  // binned blocks show as the merged, inactive blocks they are
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

}  // namespace c10::openreg
