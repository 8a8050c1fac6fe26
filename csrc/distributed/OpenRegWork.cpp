#include "distributed/OpenRegWork.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

namespace c10d::openreg {

OpenRegWork::OpenRegWork(
    int rank, OpType type, const char* op, c10::Device device, std::shared_ptr<const PeerProcesses> peers,
    std::vector<at::Tensor> host_views, std::vector<at::Tensor> outputs, std::function<void()> finish)
    : Work(rank, type),
      op_(op),
      device_(device),
      peers_(std::move(peers)),
      host_views_(std::move(host_views)),
      outputs_(std::move(outputs)),
      finish_(std::make_shared<Finish>()) {
  finish_->run = std::move(finish);
}

void OpenRegWork::finish(Finish& finish) {
  if (finish.run) {
    std::call_once(finish.once, finish.run);
  }
}

void OpenRegWork::launched(std::vector<c10::intrusive_ptr<Work>> gloo_works) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    gloo_works_ = std::move(gloo_works);
    launched_ = true;
    future = future_;
  }
  launch_done_.notify_all();
  // A future asked for before the launch is connected here, outside the lock:
  // its callbacks may run at once and call back into this Work.
  if (future) {
    complete_when_done(future);
  }
}

void OpenRegWork::failed(std::exception_ptr error) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    launch_error_ = std::move(error);
    launched_ = true;
    future = future_;
  }
  launch_done_.notify_all();
  if (future) {
    complete_when_done(future);
  }
}

bool OpenRegWork::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    if (!launched_) {
      return false;
    }
    for (const auto& work : gloo_works_) {
      if (!work->isCompleted()) {
        return false;
      }
    }
  }
  if (!exception()) {
    finish(*finish_);
  }
  return true;
}

bool OpenRegWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(launch_mutex_);
  if (!launched_ || launch_error_) {
    return false;
  }
  for (const auto& work : gloo_works_) {
    if (!work->isSuccess()) {
      return false;
    }
  }
  return true;
}

std::exception_ptr OpenRegWork::exception() const {
  std::lock_guard<std::mutex> lock(launch_mutex_);
  if (launch_error_) {
    return launch_error_;
  }
  for (const auto& work : gloo_works_) {
    if (auto error = work->exception()) {
      return error;
    }
  }
  return nullptr;
}

std::vector<at::Tensor> OpenRegWork::result() {
  return outputs_;
}

bool OpenRegWork::wait(std::chrono::milliseconds timeout) {
  // One timeout for the whole wait: the launch (bounded by gloo's timeout,
  // its agreement being a gloo collective), then gloo's works. Running out of
  // it raises as gloo's Work::wait does; the collective goes on, and a later
  // wait() completes it, as with gloo.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // At least 1 ms: a zero timeout (kNoTimeout) would mean none.
  const auto remaining = [&] {
    return timeout == kNoTimeout
        ? kNoTimeout
        : std::max(
              std::chrono::milliseconds(1),
              std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
  };
  {
    std::unique_lock<std::mutex> lock(launch_mutex_);
    if (timeout == kNoTimeout) {
      launch_done_.wait(lock, [this] { return launched_; });
    } else if (!launch_done_.wait_for(lock, timeout, [this] { return launched_; })) {
      TORCH_CHECK(false, "Operation timed out!");
    }
  }
  if (launch_error_) {
    std::rethrow_exception(launch_error_);
  }
  bool completed = true;
  for (const auto& work : gloo_works_) {
    try {
      completed = work->wait(remaining()) && completed;
    } catch (...) {
      rethrow_with(peers_->failure(op_, rank_, device_));
    }
  }
  if (completed) {
    finish(*finish_);
  }
  return completed;
}

c10::intrusive_ptr<c10::ivalue::Future> OpenRegWork::getFuture() {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    if (future_) {
      return future_;
    }
    future_ = future = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{device_});
    if (!launched_) {
      return future;  // launched() or failed() connects it
    }
  }
  complete_when_done(future);
  return future;
}

void OpenRegWork::complete_when_done(const c10::intrusive_ptr<c10::ivalue::Future>& future) const {
  if (launch_error_) {
    future->setError(launch_error_);
    return;
  }
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> gloo_futures;
  for (const auto& work : gloo_works_) {
    gloo_futures.push_back(work->getFuture());
  }
  auto done = gloo_futures.size() == 1
      ? gloo_futures.front()
      : c10::collectAll(c10::List<c10::intrusive_ptr<c10::ivalue::Future>>(std::move(gloo_futures)));
  done->addCallback([future, outputs = outputs_, finish = finish_,
                     context = [op = op_, rank = rank_, device = device_, peers = peers_] {
                       return peers->failure(op, rank, device);
                     }](c10::ivalue::Future& gloo_future) {
    try {
      if (!gloo_future.hasError()) {
        OpenRegWork::finish(*finish);
      } else {
        try {
          std::rethrow_exception(gloo_future.exception_ptr());
        } catch (...) {
          rethrow_with(context());
        }
      }
    } catch (...) {
      future->setError(std::current_exception());
      return;
    }
    future->markCompleted(c10::IValue(outputs));
  });
}

void OpenRegWork::abort() {
  std::lock_guard<std::mutex> lock(launch_mutex_);
  for (const auto& work : gloo_works_) {
    work->abort();
  }
}

}  // namespace c10d::openreg
