// Streams: in-order task queues, each drained by its own worker thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "openreg.h"

namespace openreg::runtime {

class Stream {
 public:
  // handle is 0 for a device's default stream.
  Stream(uintptr_t handle, int device, int priority);

  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  orStream_t handle() const {
    return reinterpret_cast<orStream_t>(handle_);
  }
  int device() const {
    return device_;
  }
  int priority() const {
    return priority_;
  }

  // Queues task behind the work submitted so far, starting the worker at the
  // first submission. Fails (recording a message that names context) once the
  // stream is being destroyed, or if the worker cannot be started.
  // A marker (an event record) runs under the stream's lock, together with
  // its completion, so a stream and its events never disagree about what has
  // completed; it must be quick and take no stream's lock.
  orError_t submit(const char* context, std::function<void()> task, bool marker = false);
  // True if every task submitted so far has completed.
  bool idle();
  // Blocks until every task submitted before the call has completed.
  void synchronize();
  // Refuses further work, lets the worker finish the queued tasks and joins
  // it. False if another thread has already stopped the stream.
  bool stop();

 private:
  struct Task {
    std::function<void()> body;
    bool marker;
  };

  void run();
  // With mutex_ held.
  void complete();

  const uintptr_t handle_;
  const int device_;
  // Reported only: the workers are ordinary threads of equal priority, since
  // raising a thread's priority needs privileges the runtime may lack.
  const int priority_;

  std::mutex mutex_;
  std::condition_variable workQueued_;  // the worker waits for tasks
  std::condition_variable workCompleted_;  // synchronizing callers wait here
  std::deque<Task> tasks_;
  uint64_t submitted_ = 0;
  uint64_t completed_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

// The stream a handle names: NULL is the current device's default stream
// (created on first use). Otherwise records an orErrorInvalidResourceHandle
// message naming context and the handle, and returns null.
std::shared_ptr<Stream> findStream(orStream_t handle, const char* context);

// Blocks until the work submitted so far to the device's streams (its default
// stream included) has completed; returns at once when none is pending. A host
// function must not call it for its own stream's device: it would wait for
// itself.
void synchronizeDevice(int index);

}  // namespace openreg::runtime
