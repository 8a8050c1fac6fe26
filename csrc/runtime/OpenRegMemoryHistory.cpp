#include "runtime/OpenRegMemoryHistory.h"

#include <algorithm>
#include <atomic>

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/profiler/unwind/unwind.h>

namespace c10::openreg {
namespace {

// The gathering switch read on every allocation and free: NEVER while
// recording is off, so the allocator pays one relaxed load.
std::atomic<int> g_context_level{static_cast<int>(RecordContext::NEVER)};
std::atomic<bool> g_cpp_stacks{false};

template <typename T>
bool one_of(const T& value, std::initializer_list<T> valid) {
  return std::find(valid.begin(), valid.end(), value) != valid.end();
}

}  // namespace

HistoryOptions parse_history_options(
    const std::optional<std::string>& enabled, const std::optional<std::string>& context, const std::string& stacks,
    int64_t max_entries, bool clear_history, const std::vector<std::string>& skip_actions) {
  // torch.cuda's messages for the same mistakes.
  TORCH_CHECK_VALUE(
      !enabled || one_of<std::string>(*enabled, {"state", "all"}),
      "expected state to be 'state', 'all', or None, got '", *enabled, "'");
  TORCH_CHECK_VALUE(
      !context || one_of<std::string>(*context, {"state", "alloc", "all"}),
      "expected context to be 'state', 'alloc', 'all', or None, got '", *context, "'");
  TORCH_CHECK_VALUE(
      one_of<std::string>(stacks, {"python", "all"}), "expected stacks to be 'python', or 'all', got '", stacks, "'");
  TORCH_CHECK_VALUE(max_entries > 0, "_record_memory_history: max_entries must be positive, got ", max_entries);
  HistoryOptions options;
  options.enabled = enabled.has_value();
  if (options.enabled && context) {
    options.context = *context == "all" ? RecordContext::ALL
        : *context == "alloc"           ? RecordContext::ALLOC
                                        : RecordContext::STATE;
  }
  options.cpp_stacks = stacks == "all";
  // As CUDA: "state" keeps no history beyond the live blocks' stacks.
  options.max_entries = options.enabled && *enabled == "all" ? static_cast<size_t>(max_entries) : 1;
  options.clear = clear_history;
  for (const std::string& action : skip_actions) {
    options.skipped.push_back(c10::CachingDeviceAllocator::parseTraceEntryAction(action));
  }
  return options;
}

void set_history_gathering(const HistoryOptions& options) {
  if (options.cpp_stacks && options.context != RecordContext::NEVER) {
    torch::unwind::unwind();  // warms up C++ unwinding, as CUDA does
  }
  g_cpp_stacks.store(options.cpp_stacks, std::memory_order_relaxed);
  g_context_level.store(static_cast<int>(options.context), std::memory_order_relaxed);
}

std::shared_ptr<c10::GatheredContext> gather_context(RecordContext level) noexcept {
  const int configured = g_context_level.load(std::memory_order_relaxed);
  if (configured == static_cast<int>(RecordContext::NEVER) || configured < static_cast<int>(level)) {
    return nullptr;
  }
  try {
    return torch::CapturedTraceback::gather(
        /*python=*/true, /*script=*/true, /*cpp=*/g_cpp_stacks.load(std::memory_order_relaxed));
  } catch (...) {
    return nullptr;  // an allocation or a free never fails for want of a stack
  }
}

void DeviceMemoryHistory::configure(const HistoryOptions& options) {
  enabled_ = options.enabled;
  context_ = options.context;
  max_entries_ = std::max<size_t>(1, options.max_entries);
  skipped_ = options.skipped;
  // As CUDA: turning recording off, or asking for a clean start, drops the
  // entries; the stacks of live blocks stay (they still describe them).
  if (!enabled_ || options.clear) {
    entries_.clear();
    next_ = 0;
  }
}

void DeviceMemoryHistory::record(
    TraceEntry::Action action, c10::DeviceIndex device, size_t addr, size_t size, void* stream,
    std::shared_ptr<c10::GatheredContext> context) {
  if (!enabled_ || std::find(skipped_.begin(), skipped_.end(), action) != skipped_.end()) {
    return;
  }
  if (context_ < RecordContext::ALLOC) {
    context = nullptr;
  }
  TraceEntry entry(action, device, addr, size, stream, {0, 0}, 0, std::move(context));
  entry.time_.t_ = c10::getTime() / 1000;  // microseconds since the epoch, as CUDA's time_us
  if (entries_.size() < max_entries_) {
    entries_.push_back(std::move(entry));
    return;
  }
  // A full ring overwrites its oldest entry.
  entries_[next_] = std::move(entry);
  next_ = (next_ + 1) % entries_.size();
}

void DeviceMemoryHistory::set_block_context(const void* ptr, std::shared_ptr<c10::GatheredContext> context) {
  if (context != nullptr) {
    blocks_[ptr] = std::move(context);
  }
}

std::shared_ptr<c10::GatheredContext> DeviceMemoryHistory::block_context(const void* ptr) const {
  auto it = blocks_.find(ptr);
  return it == blocks_.end() ? nullptr : it->second;
}

void DeviceMemoryHistory::set_segment_context(const void* ptr, std::shared_ptr<c10::GatheredContext> context) {
  if (context != nullptr) {
    segments_[ptr] = std::move(context);
  }
}

std::shared_ptr<c10::GatheredContext> DeviceMemoryHistory::segment_context(const void* ptr) const {
  auto it = segments_.find(ptr);
  return it == segments_.end() ? nullptr : it->second;
}

std::vector<TraceEntry> DeviceMemoryHistory::trace() const {
  std::vector<TraceEntry> ordered;
  ordered.reserve(entries_.size());
  ordered.insert(ordered.end(), entries_.begin() + static_cast<ptrdiff_t>(next_), entries_.end());
  ordered.insert(ordered.end(), entries_.begin(), entries_.begin() + static_cast<ptrdiff_t>(next_));
  return ordered;
}

}  // namespace c10::openreg
