#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <sys/types.h>

// Issues a process group's gloo calls in the order its caller made them, off
// the calling thread when the caller should not wait.
//
// gloo matches the collectives of the ranks by the order each rank issues them
// (each takes the next tag of the group), so every call that reaches gloo
// through this backend goes through one launcher, in call order. A launch
// first agrees with the other ranks on the arguments (ArgumentAgreement.h), a
// round trip that waits for the slowest rank to reach the same call: an
// asynchronous collective (DDP's gradient buckets) is queued, so the caller
// goes on computing while the agreement and gloo's transfer run, as a gloo
// collective on CPU tensors lets it; a synchronous one runs on the caller,
// which waits anyway, once the launches before it are made.
namespace c10d::openreg {

class CollectiveLauncher {
 public:
  // A launch reports its own errors (to its Work): it never throws.
  using Launch = std::function<void()>;

  CollectiveLauncher();
  // Runs the queued launches, then stops the thread.
  ~CollectiveLauncher();
  CollectiveLauncher(const CollectiveLauncher&) = delete;
  CollectiveLauncher& operator=(const CollectiveLauncher&) = delete;

  // Queues `launch` behind the earlier ones; returns at once.
  void queue(Launch launch);
  // Waits until the earlier launches are made, then runs `call` on the
  // calling thread (its exceptions propagate), before any later launch.
  void run_here(const std::function<void()>& call);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Launch> queued_;
  // A launch is running, on the thread or on a caller.
  bool busy_ = false;
  bool stopping_ = false;
  // The thread exists only in the process that started it: a forked child
  // inherits the object, not the thread.
  pid_t owner_;
  std::thread thread_;
};

}  // namespace c10d::openreg
