#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "distributed/CollectiveFailure.h"

// The c10d::Work of an openreg collective: the gloo works it was launched as
// (one, or one per tensor pair for the coalesced forms gloo lacks), over the
// host views of the openreg tensors.
//
// A collective is launched once the ranks agree on its arguments, possibly on
// the launcher's thread after the call returned (CollectiveLauncher.h): until
// then the Work is pending, and a launch that fails (the ranks disagree, a
// peer is gone, gloo refuses the arguments) completes it with that error. The
// Work holds the host views (and so the scoped accesses and the device
// storages) until it is destroyed; gloo's own work holds them too until it has
// run, so they stay open until gloo is done with them even if the caller drops
// this Work first.
namespace c10d::openreg {

class OpenRegWork : public Work {
 public:
  // `finish`, if any, runs once gloo's works have succeeded, before this Work
  // reports them complete (wait(), isCompleted(), the future): a receive into
  // a staging buffer copies it into its tensor there.
  OpenRegWork(
      int rank, OpType type, const char* op, c10::Device device, std::shared_ptr<const PeerProcesses> peers,
      std::vector<at::Tensor> host_views, std::vector<at::Tensor> outputs, std::function<void()> finish = nullptr);

  // The launch's outcome: gloo's works, or the error that stopped it.
  void launched(std::vector<c10::intrusive_ptr<Work>> gloo_works);
  void failed(std::exception_ptr error);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  // wait() has already ordered the caller after the collective (the device's
  // kernels run on the calling thread).
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout) override;
  // As NCCL's: completes with the openreg tensors the collective wrote, on the
  // collective's device, so a continuation orders the current openreg stream
  // through the future's events.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  void abort() override;

 private:
  // Completes `future` when the gloo works do (or with the launch error).
  void complete_when_done(const c10::intrusive_ptr<c10::ivalue::Future>& future) const;

  // Shared with the future's callback, which may outlive this Work.
  struct Finish {
    std::once_flag once;
    std::function<void()> run;
  };
  // Runs `finish` once; a caller racing another waits for it to be done.
  static void finish(Finish& finish);

  const char* op_;
  c10::Device device_;
  std::shared_ptr<const PeerProcesses> peers_;
  const std::vector<at::Tensor> host_views_;
  const std::vector<at::Tensor> outputs_;
  const std::shared_ptr<Finish> finish_;

  mutable std::mutex launch_mutex_;
  std::condition_variable launch_done_;
  bool launched_ = false;
  // Set once launched_ is, and not changed afterwards.
  std::vector<c10::intrusive_ptr<Work>> gloo_works_;
  std::exception_ptr launch_error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace c10d::openreg
