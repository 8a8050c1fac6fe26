// Completion checks (orSetCompletionChecks): the mode, and the host ends of
// the asynchronous copies issued while it is on. The deferral itself is the
// streams' (Stream.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "openreg.h"

namespace openreg::runtime {

class Stream;

// Bit 0 is the mode; the bits above count the host writes found and not yet
// reported. One word, so that every path that must notice either pays one
// relaxed load while checks are off and nothing awaits a report.
extern std::atomic<uint64_t> checkWord;
inline constexpr uint64_t kChecksOn = 1;
inline constexpr uint64_t kUnreportedWrite = 2;

struct Checks {
  uint64_t word;
  bool on() const {
    return (word & kChecksOn) != 0;
  }
  bool unreported() const {
    return word >= kUnreportedWrite;
  }
  // Either: a synchronizing call may have a host write to report.
  bool any() const {
    return word != 0;
  }
};

// Relaxed: a change of mode reaches the workers through requireAllStreams,
// and a report through the completion of the copy that found it.
inline Checks completionChecks() {
  return {checkWord.load(std::memory_order_relaxed)};
}

// The host ends of one asynchronous copy issued while checks are on, shared
// with its queued task.
class CheckedCopy {
 public:
  // Snapshots a host source (HostToDevice, HostToHost) and poisons a host
  // destination (DeviceToHost, HostToHost) unless a queued checked copy still
  // has to read it. target and origin are the addresses the copy goes through
  // (the host view for a device end); stream is where it is queued, which
  // outlives its tasks. Null, recording a message naming context, if the
  // snapshot cannot be allocated.
  static std::shared_ptr<CheckedCopy> issue(
      void* target, const void* origin, size_t count, orMemcpyKind kind, const char* context, Stream& stream);

  // Stops guarding a source the copy never read (its submission failed).
  ~CheckedCopy();
  CheckedCopy(const CheckedCopy&) = delete;
  CheckedCopy& operator=(const CheckedCopy&) = delete;

  // On the stream's worker: the copy itself, preceded by the comparison of
  // the source with its snapshot (a difference is left on the stream for its
  // next observer) and followed by updating the snapshots of queued copies
  // whose sources it has just written.
  void run();

 private:
  CheckedCopy(void* target, const void* origin, size_t count, bool hostDestination, const char* context, Stream& stream)
      : target_(target),
        origin_(origin),
        count_(count),
        hostDestination_(hostDestination),
        context_(context),
        stream_(stream) {}

  void* const target_;
  const void* const origin_;
  const size_t count_;
  const bool hostDestination_;
  const char* const context_;
  Stream& stream_;
  // The source as the call saw it, set while the copy is queued and has a
  // host source: exactly while the copy is among the guarded sources, whose
  // mutex guards it.
  std::unique_ptr<unsigned char[]> snapshot_;
};

}  // namespace openreg::runtime
