// Events: markers recorded into streams, complete once the stream reaches them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "CompletionChecks.h"
#include "Stream.h"
#include "openreg.h"

namespace openreg::runtime {

using Clock = std::chrono::steady_clock;

// One orEventRecord. Shared by the event and the marker task, so either may
// outlive the other (an event may be destroyed while its record is queued).
class Record {
 public:
  Record(bool timed, const Stream& stream) : timed_(timed), device_(stream.device()), stream_(stream.handle()) {}

  // The device of the stream it was recorded on.
  int device() const {
    return device_;
  }
  // Its marker's task number, set once by Event::record before it publishes
  // the record.
  void setTask(uint64_t task) {
    task_ = task;
  }

  // Called by the stream's worker when it reaches the marker.
  void complete();
  bool completed();
  // While checks (as the caller loaded them) are on, first requires the
  // stream's work up to the record: nothing else may need it.
  void wait(Checks checks);
  // The host writes found by the stream's work up to the record
  // (Stream::takeHostWrites).
  orError_t takeHostWrites(const char* observer);
  // The completion time of a completed, timed record.
  Clock::time_point time();

 private:
  const bool timed_;
  const int device_;
  // By handle, looked up (liveStream) only when checks need the stream: a
  // record may outlive it, and one no longer live has drained.
  const orStream_t stream_;
  uint64_t task_ = 0;
  std::mutex mutex_;
  std::condition_variable completion_;
  bool completed_ = false;
  Clock::time_point time_;
};

class Event {
 public:
  Event(uintptr_t handle, unsigned int flags) : handle_(handle), flags_(flags) {}

  orEvent_t handle() const {
    return reinterpret_cast<orEvent_t>(handle_);
  }
  bool timed() const {
    return (flags_ & orEventDisableTiming) == 0;
  }

  // Queues a new record on stream; it replaces the previous one.
  orError_t record(Stream& stream);
  // The most recent record, or null if the event was never recorded.
  std::shared_ptr<Record> latest();

 private:
  const uintptr_t handle_;
  const unsigned int flags_;
  std::mutex mutex_;
  std::shared_ptr<Record> latest_;
};

}  // namespace openreg::runtime
