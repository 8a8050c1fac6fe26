#pragma once

#include <vector>

#include <c10/core/CachingDeviceAllocator.h>

#include "runtime/OpenRegMemoryHistory.h"

// The caching allocator's side of torch.openreg.memory._record_memory_history
// and _snapshot: switching recording on every device cache, and reading their
// segments and recorded history (python/MemorySnapshot.cpp turns them into
// torch.cuda's snapshot dictionary).
namespace c10::openreg {

// Starts, changes or stops recording on every device.
void recordMemoryHistory(const HistoryOptions& options);

// The allocator's state on every device: its segments (address order, device
// by device) with their blocks, and each device's recorded history.
struct MemorySnapshot {
  std::vector<c10::CachingDeviceAllocator::SegmentInfo> segments;
  std::vector<std::vector<TraceEntry>> device_traces;
};
MemorySnapshot memorySnapshot();

}  // namespace c10::openreg
