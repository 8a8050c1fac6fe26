// Events: markers recorded into streams, complete once the stream reaches them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "Stream.h"
#include "openreg.h"

namespace openreg::runtime {

using Clock = std::chrono::steady_clock;

// One orEventRecord. Shared by the event and the marker task, so either may
// outlive the other (an event may be destroyed while its record is queued).
class Record {
 public:
  Record(bool timed, int device) : timed_(timed), device_(device) {}

  // The device of the stream it was recorded on.
  int device() const {
    return device_;
  }

  // Called by the stream's worker when it reaches the marker.
  void complete();
  bool completed();
  void wait();
  // The completion time of a completed, timed record.
  Clock::time_point time();

 private:
  const bool timed_;
  const int device_;
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
