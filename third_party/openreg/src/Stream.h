// Streams: in-order task queues, each drained by its own worker thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "openreg.h"

namespace openreg::runtime {

// What completion checks found: the host wrote into the source of a queued
// copy (CompletionChecks.h).
struct HostWrite {
  uint64_t task;  // the copy's task number on its stream
  const void* source;
  size_t count;
  const char* context;  // the copy's entry point and kind
  size_t offset;  // of the first changed byte
};

// While completion checks are on, a stream's worker starts a task only once
// something requires it (require, synchronize, requireAll, stop): tasks are
// numbered from 1 in submission order, and the worker runs them up to the
// highest number required.
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
  // completed; it must be quick and take no stream's lock. *number, if given,
  // receives the task's number.
  orError_t submit(const char* context, std::function<void()> task, bool marker = false, uint64_t* number = nullptr);
  // True if every task submitted so far has completed.
  bool idle();
  // Blocks until every task submitted before the call has completed. If
  // observer names an entry point, returns as its error the host writes that
  // those tasks found (takeHostWrites); the runtime's internal waits pass
  // null and leave them to the host's next synchronization.
  orError_t synchronize(const char* observer = nullptr);
  // Lets the worker run the tasks up to number `task`.
  void require(uint64_t task);
  // Lets the worker run every task submitted so far: the mode changed.
  void requireAll();
  // Refuses further work, lets the worker finish the queued tasks and joins
  // it. False if another thread has already stopped the stream.
  bool stop();

  // Called by the running task (write.task is set here): kept until a
  // synchronizing call observes the task complete.
  void addHostWrite(HostWrite write);
  // The host writes found by the tasks up to number `task`, each returned
  // once: orErrorHostWriteDuringCopy with a message that names observer and
  // the first of them, or orSuccess if there are none.
  orError_t takeHostWrites(uint64_t task, const char* observer);

 private:
  struct Task {
    std::function<void()> body;
    bool marker;
  };

  void run();
  // With mutex_ held.
  void complete();
  void demand(uint64_t task);
  orError_t reportHostWrites(uint64_t task, const char* observer);

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
  uint64_t required_ = 0;  // read only while completion checks are on
  bool stopping_ = false;
  std::vector<HostWrite> hostWrites_;  // in task order
  std::thread worker_;
};

// The stream a handle names: NULL is the current device's default stream
// (created on first use). Otherwise records an orErrorInvalidResourceHandle
// message naming context and the handle, and returns null.
std::shared_ptr<Stream> findStream(orStream_t handle, const char* context);

// The stream a handle of device names while it is live (NULL: the device's
// default stream), recording no error if it is not.
std::shared_ptr<Stream> liveStream(orStream_t handle, int device);

// Blocks until the work submitted so far to the device's streams (its default
// stream included) has completed; returns at once when none is pending. A host
// function must not call it for its own stream's device: it would wait for
// itself. observer as for Stream::synchronize: the first stream with host
// writes to report reports them, the others keep theirs.
orError_t synchronizeDevice(int index, const char* observer = nullptr);

// Lets every stream of the first deviceCount devices run the work queued so
// far (Stream::requireAll).
void requireAllStreams(int deviceCount);

}  // namespace openreg::runtime
