#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <c10/core/CachingDeviceAllocator.h>

// Memory history: what torch.cuda.memory._record_memory_history makes CUDA's
// caching allocator record, for openreg's. While recording, every allocator
// action (alloc, free_requested, free_completed, segment_alloc, segment_free,
// oom, snapshot) goes into a per-device ring buffer with the stack that caused
// it, and live blocks and segments remember the stack that allocated them; a
// snapshot (OpenRegMemorySnapshot.h) reports both in torch.cuda's format.
//
// Stacks are PyTorch's own CapturedTraceback (Python, TorchScript and
// optionally C++ frames). Gathering Python frames takes the GIL, so, as in
// CUDA's allocator, a stack is gathered only while recording is on and always
// before the allocator takes any of its locks: a thread that holds an
// allocator lock never waits for the GIL, so it cannot deadlock with a thread
// that holds the GIL and waits for that lock. Releasing a stack never takes
// the GIL (torch defers the Python reference drops to the next gather), so
// contexts may be dropped under the allocator's locks and in deleters.
namespace c10::openreg {

using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::TraceEntry;

struct HistoryOptions {
  bool enabled = false;
  RecordContext context = RecordContext::NEVER;
  bool cpp_stacks = false;
  size_t max_entries = 1;
  bool clear = false;
  std::vector<TraceEntry::Action> skipped;
};

// _record_memory_history's arguments, checked with torch.cuda's rules.
HistoryOptions parse_history_options(
    const std::optional<std::string>& enabled, const std::optional<std::string>& context, const std::string& stacks,
    int64_t max_entries, bool clear_history, const std::vector<std::string>& skip_actions);

// Process-wide switch for stack gathering (the per-device buffers are
// configured by the allocator under each device's lock).
void set_history_gathering(const HistoryOptions& options);

// The stack of the current thread if recording keeps stacks at `level`,
// else nullptr. Never call it with an allocator lock held (see above). While
// recording is off this is one relaxed atomic load. Never throws: a stack
// that cannot be gathered (a thread that cannot take the GIL, an exiting
// interpreter) is simply absent.
std::shared_ptr<c10::GatheredContext> gather_context(RecordContext level) noexcept;

// The history of one device. Every method runs under the device cache's
// mutex, which orders the entries exactly as the allocator acted.
class DeviceMemoryHistory {
 public:
  void configure(const HistoryOptions& options);

  bool recording() const {
    return enabled_;
  }

  // Appends an entry (dropped if its action is skipped). The stack is kept on
  // the entry only when recording keeps stacks for the trace (context alloc
  // or all).
  void record(
      TraceEntry::Action action, c10::DeviceIndex device, size_t addr, size_t size, void* stream,
      std::shared_ptr<c10::GatheredContext> context);

  // Stacks of live blocks and segments, by address (context state or more).
  void set_block_context(const void* ptr, std::shared_ptr<c10::GatheredContext> context);
  std::shared_ptr<c10::GatheredContext> block_context(const void* ptr) const;
  // Called for every completed free: nothing to do unless stacks were kept.
  void forget_block(const void* ptr) {
    if (!blocks_.empty()) {
      blocks_.erase(ptr);
    }
  }
  void set_segment_context(const void* ptr, std::shared_ptr<c10::GatheredContext> context);
  std::shared_ptr<c10::GatheredContext> segment_context(const void* ptr) const;
  void forget_segment(const void* ptr) {
    segments_.erase(ptr);
  }

  // The recorded entries, oldest first.
  std::vector<TraceEntry> trace() const;

 private:
  bool enabled_ = false;
  RecordContext context_ = RecordContext::NEVER;
  size_t max_entries_ = 1;
  std::vector<TraceEntry::Action> skipped_;
  std::vector<TraceEntry> entries_;
  size_t next_ = 0;  // where the next entry goes once the ring is full
  std::unordered_map<const void*, std::shared_ptr<c10::GatheredContext>> blocks_;
  std::unordered_map<const void*, std::shared_ptr<c10::GatheredContext>> segments_;
};

}  // namespace c10::openreg
