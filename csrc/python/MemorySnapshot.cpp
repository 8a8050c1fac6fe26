// torch.openreg.memory._snapshot(): the allocator's snapshot as the Python
// dictionary torch.cuda.memory._snapshot() returns, key for key, so that
// torch.cuda._memory_viz and pytorch.org/memory_viz read it unchanged.
#include "python/MemorySnapshot.h"

#include <c10/core/AllocatorConfig.h>
#include <c10/util/irange.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include "TorchCompat.h"
#include "runtime/OpenRegMemorySnapshot.h"

namespace c10::openreg {
namespace {

namespace py = pybind11;
using c10::CachingAllocator::AcceleratorAllocatorConfig;
using c10::CachingDeviceAllocator::SegmentInfo;

const char* action_name(TraceEntry::Action action) {
  switch (action) {
    case TraceEntry::ALLOC:
      return "alloc";
    case TraceEntry::FREE_REQUESTED:
      return "free_requested";
    case TraceEntry::FREE_COMPLETED:
      return "free_completed";
    case TraceEntry::SEGMENT_ALLOC:
      return "segment_alloc";
    case TraceEntry::SEGMENT_FREE:
      return "segment_free";
    case TraceEntry::SEGMENT_MAP:
      return "segment_map";
    case TraceEntry::SEGMENT_UNMAP:
      return "segment_unmap";
    case TraceEntry::SNAPSHOT:
      return "snapshot";
    case TraceEntry::OOM:
      return "oom";
#if OPENREG_TRACE_HAS_ANNOTATE
    case TraceEntry::ANNOTATE:
      return "annotate";
#endif
  }
  TORCH_CHECK(false, "openreg memory snapshot: unknown trace action ", static_cast<int>(action));
}

// Stacks are symbolized in one batch at the end (symbolizing is the slow
// part, and stacks repeat); until then each dictionary that needs "frames"
// waits here with its stack.
class FrameCollector {
 public:
  void add(py::dict destination, const std::shared_ptr<c10::GatheredContext>& context) {
    if (context == nullptr) {
      destination["frames"] = py::list();
      return;
    }
    tracebacks_.push_back(torch::getCapturedTracebackFromContext(context));
    destinations_.push_back(std::move(destination));
  }

  // Needs the GIL (Python frames are read from their code objects).
  void symbolize() {
    const torch::SymbolizedTracebacks symbolized = torch::symbolize(tracebacks_);
    std::vector<py::dict> all_frames;
    all_frames.reserve(symbolized.all_frames.size());
    for (const auto& frame : symbolized.all_frames) {
      py::dict entry;
      entry["filename"] = frame.filename;
      entry["line"] = frame.lineno;
      entry["name"] = frame.funcname;
      all_frames.push_back(std::move(entry));
    }
    for (const auto i : c10::irange(destinations_.size())) {
      py::list frames;
      for (const uint64_t index : symbolized.tracebacks.at(i)) {
        frames.append(all_frames.at(index));
      }
      destinations_[i]["frames"] = frames;
    }
  }

 private:
  std::vector<torch::CapturedTraceback*> tracebacks_;
  std::vector<py::dict> destinations_;
};

py::dict segment_dict(const SegmentInfo& segment, FrameCollector& frames) {
  py::dict result;
  result["device"] = segment.device;
  result["address"] = segment.address;
  result["total_size"] = segment.total_size;
  result["allocated_size"] = segment.allocated_size;
  result["active_size"] = segment.active_size;
  result["requested_size"] = segment.requested_size;
  result["stream"] = reinterpret_cast<int64_t>(segment.stream);
  result["segment_type"] = segment.is_large ? "large" : "small";
  result["segment_pool_id"] = py::make_tuple(segment.owner_private_pool_id.first, segment.owner_private_pool_id.second);
  result["is_expandable"] = segment.is_expandable;
  frames.add(result, segment.context_when_allocated);
  py::list blocks;
  size_t address = segment.address;
  for (const auto& block : segment.blocks) {
    py::dict entry;
    entry["address"] = address;
    entry["size"] = block.size;
    entry["requested_size"] = block.requested_size;
    // torch.cuda's names (its docstring says "active_awaiting_free"; its code
    // and the visualizer use "active_pending_free").
    entry["state"] = block.allocated ? "active_allocated" : block.active ? "active_pending_free" : "inactive";
    frames.add(entry, block.context_when_allocated);
    blocks.append(entry);
    address += block.size;
  }
  result["blocks"] = blocks;
  return result;
}

py::dict trace_entry_dict(const TraceEntry& entry, FrameCollector& frames) {
  py::dict result;
  result["action"] = action_name(entry.action_);
  // For an out-of-memory entry the address field holds the free bytes.
  result[entry.action_ == TraceEntry::OOM ? "device_free" : "addr"] = entry.addr_;
  result["size"] = entry.size_;
  result["stream"] = reinterpret_cast<int64_t>(entry.stream_);
  result["time_us"] = static_cast<int64_t>(entry.time_.t_);
  result["compile_context"] = entry.compile_context_;
  result["user_metadata"] = entry.user_metadata_;
  frames.add(result, entry.context_);
  return result;
}

// The settings behind the snapshot, under the names CUDA's snapshot uses.
py::dict allocator_settings() {
  py::dict settings;
  settings["PYTORCH_ALLOC_CONF"] = AcceleratorAllocatorConfig::last_allocator_settings();
  settings["max_split_size"] = AcceleratorAllocatorConfig::max_split_size();
  settings["garbage_collection_threshold"] = AcceleratorAllocatorConfig::garbage_collection_threshold();
  settings["expandable_segments"] = AcceleratorAllocatorConfig::use_expandable_segments();
  py::dict roundup;
  size_t interval_start = 1;
  for (const size_t divisions : AcceleratorAllocatorConfig::roundup_power2_divisions()) {
    roundup[py::str(std::to_string(interval_start))] = divisions;
    interval_start *= 2;
  }
  settings["roundup_power2_divisions"] = roundup;
  return settings;
}

}  // namespace

py::dict memory_snapshot_dict(bool include_traces) {
  const MemorySnapshot snapshot = memorySnapshot();
  FrameCollector frames;
  py::list segments;
  for (const SegmentInfo& segment : snapshot.segments) {
    segments.append(segment_dict(segment, frames));
  }
  py::list device_traces;
  for (const auto& trace : snapshot.device_traces) {
    py::list entries;
    if (include_traces) {
      for (const TraceEntry& entry : trace) {
        entries.append(trace_entry_dict(entry, frames));
      }
    }
    device_traces.append(entries);
  }
  frames.symbolize();
  py::dict result;
  result["segments"] = segments;
  result["device_traces"] = device_traces;
  result["allocator_settings"] = allocator_settings();
  result["external_annotations"] = py::list();
  return result;
}

}  // namespace c10::openreg
