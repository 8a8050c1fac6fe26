#include "distributed/CollectiveLauncher.h"

#include <unistd.h>

#include <c10/util/Exception.h>

#include "distributed/ProcessGroupOpenReg.h"

namespace c10d::openreg {

CollectiveLauncher::CollectiveLauncher() : owner_(::getpid()), thread_([this] { run(); }) {}

CollectiveLauncher::~CollectiveLauncher() {
  if (::getpid() != owner_) {
    // A forked child: no thread to stop, and the mutex may have been held
    // by it at the fork.
    thread_.detach();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void CollectiveLauncher::queue(Launch launch) {
  TORCH_CHECK(
      ::getpid() == owner_, ProcessGroupOpenReg::kName,
      ": a process group cannot be used in a process forked after its creation");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(std::move(launch));
  }
  changed_.notify_all();
}

void CollectiveLauncher::run_here(const std::function<void()>& call) {
  TORCH_CHECK(
      ::getpid() == owner_, ProcessGroupOpenReg::kName,
      ": a process group cannot be used in a process forked after its creation");
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !busy_ && queued_.empty(); });
  busy_ = true;
  lock.unlock();
  // Hands the turn back however `call` ends.
  struct Done {
    CollectiveLauncher& launcher;
    ~Done() {
      {
        std::lock_guard<std::mutex> lock(launcher.mutex_);
        launcher.busy_ = false;
      }
      launcher.changed_.notify_all();
    }
  } done{*this};
  call();
}

void CollectiveLauncher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return (!busy_ && !queued_.empty()) || (stopping_ && queued_.empty()); });
    if (queued_.empty()) {
      return;
    }
    Launch launch = std::move(queued_.front());
    queued_.pop_front();
    busy_ = true;
    lock.unlock();
    launch();
    launch = nullptr;  // releases what the launch held before the next one runs
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace c10d::openreg
