#pragma once

#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ThreadLocalState.h>
#include <ATen/core/Tensor.h>

#include "aten/DeviceCheck.h"
#include "aten/CpuAliases.h"
#include "distributed/ArgumentAgreement.h"
#include "distributed/CollectiveLauncher.h"
#include "distributed/OpenRegWork.h"
#include "distributed/ProcessGroupOpenReg.h"

// One call of an orccl operation, from the arguments to its Work: checks that
// every tensor is on one openreg device, describes the arguments for the
// ranks' agreement, turns the tensors into host views, and launches gloo's
// operation on them once the ranks agree.
namespace c10d::openreg {

class CollectiveCall {
 public:
  using TensorList = std::vector<at::Tensor>;
  using TensorLists = std::vector<std::vector<at::Tensor>>;
  using Works = std::vector<c10::intrusive_ptr<Work>>;

  CollectiveCall(ProcessGroupOpenReg& pg, const char* op, OpType type)
      : pg_(pg), op_(op), type_(type), signature_(op, type) {}

  // An option every rank must pass alike (root rank, reduction).
  CollectiveCall& option(const char* name, int64_t value) {
    signature_.option(name, value);
    return *this;
  }
  // Tensors every rank passes alike (same count, dtypes and shapes).
  CollectiveCall& same(const at::Tensor& tensor) {
    check_.check_written(tensor);
    signature_.same_shape(tensor);
    return *this;
  }
  CollectiveCall& same(const TensorList& tensors) {
    for (const auto& tensor : tensors) {
      same(tensor);
    }
    return *this;
  }
  CollectiveCall& same(const TensorLists& lists) {
    for (const auto& tensors : lists) {
      same(tensors);
    }
    return *this;
  }
  // Tensors whose shapes may differ across ranks: only their dtype must agree.
  CollectiveCall& local(const at::Tensor& tensor) {
    check_.check_written(tensor);
    signature_.same_dtype(tensor);
    return *this;
  }
  CollectiveCall& local(const TensorList& tensors) {
    for (const auto& tensor : tensors) {
      local(tensor);
    }
    return *this;
  }
  // Tensors only the root passes (gather's outputs, scatter's inputs): one
  // list of a tensor per rank, each of `like`'s dtype and shape; the other
  // ranks pass none. gloo checks this on the root alone, where its error
  // would leave the other ranks waiting for the root until the group's
  // timeout, so a wrong list is refused here (refuse()).
  CollectiveCall& root_only(const TensorLists& lists, const TensorList& like, bool is_root, const char* what) {
    for (const auto& tensors : lists) {
      for (const auto& tensor : tensors) {
        check_.check_written(tensor);
      }
    }
    if (!is_root) {
      if (!lists.empty()) {
        refuse(c10::str("only the root passes an ", what, " list"));
      }
    } else if (lists.size() != 1 || static_cast<int>(lists[0].size()) != pg_.getSize()) {
      refuse(
          c10::str(
              "the root's ", what, " list holds ", lists.empty() ? 0 : lists[0].size(),
              " tensors; it must hold one per rank (", pg_.getSize(), ")"));
    } else if (like.size() == 1) {
      equal_parts(lists[0], like[0], what);
    }
    return *this;
  }
  // Tensors of a list that must each have `like`'s dtype and shape (gather's
  // and scatter's root list, all-to-all's lists: gloo moves equal parts).
  CollectiveCall& equal_parts(const TensorList& tensors, const at::Tensor& like, const char* what) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].scalar_type() != like.scalar_type() || tensors[i].sizes() != like.sizes()) {
        refuse(
            c10::str(
                what, " ", i, " is ", tensors[i].scalar_type(), tensors[i].sizes(), ", not ", like.scalar_type(),
                like.sizes(), ": every tensor of the list must have the same dtype and shape"));
      }
    }
    return *this;
  }
  // An argument error that gloo would raise on this rank alone. The call
  // still takes part in the ranks' agreement, marked as refused, so that it
  // fails on every rank (the others with the agreement's ValueError naming
  // this rank's call) and the group stays usable; this rank raises `reason`.
  CollectiveCall& refuse(std::string reason) {
    if (!refusal_) {
      refusal_ = std::move(reason);
      signature_.refuse();
    }
    return *this;
  }

  at::Tensor view(const at::Tensor& tensor) {
    if (!views_) {
      // Waits for the work queued on the device's current stream.
      views_.emplace(check_.device(), op_);
    }
    at::Tensor host = views_->alias(tensor);
    host_views_.push_back(host);
    return host;
  }
  TensorList view(const TensorList& tensors) {
    TensorList hosts;
    hosts.reserve(tensors.size());
    for (const auto& tensor : tensors) {
      hosts.push_back(view(tensor));
    }
    return hosts;
  }
  TensorLists view(const TensorLists& lists) {
    TensorLists hosts;
    hosts.reserve(lists.size());
    for (const auto& tensors : lists) {
      hosts.push_back(view(tensors));
    }
    return hosts;
  }

  // Launches `issue(gloo)` (gloo's calls on the host views, returning its
  // work or works) once the ranks agree on the arguments. An asynchronous
  // call is queued and returns at once; a synchronous one launches on the
  // calling thread, which is about to wait for it anyway. Errors reach the
  // caller through the Work.
  template <typename Issue>
  c10::intrusive_ptr<Work> launch(bool async_op, TensorList outputs, Issue issue) {
    auto work = make_work(std::move(outputs));
    auto launch = [work, refusal = refusal_ ? refusal_error() : nullptr, signature = std::move(signature_),
                   issue = std::move(issue), gloo = pg_.gloo_, peers = pg_.peers_, device = check_.device()]() mutable {
      try {
        signature.agree(*gloo, *peers, device);
        if (refusal) {
          std::rethrow_exception(refusal);
        }
        work->launched(as_works(issue(*gloo)));
      } catch (...) {
        // A rank that refused its arguments raises its own reason, whatever
        // the agreement found.
        work->failed(refusal ? refusal : std::current_exception());
      }
    };
    if (async_op) {
      // The launcher's thread sees what the caller's would (profiler, grad
      // mode): gloo records its collectives under the caller's profile.
      pg_.launcher_->queue([launch = std::move(launch), state = at::ThreadLocalState()]() mutable {
        at::ThreadLocalStateGuard guard(state);
        launch();
      });
    } else {
      pg_.launcher_->run_here(launch);
    }
    return work;
  }

  // A point-to-point operation, issued directly: it involves two ranks, so
  // there is nothing to agree on with the group, and gloo matches it by its
  // tag, not by its order among the collectives.
  c10::intrusive_ptr<Work> started(c10::intrusive_ptr<Work> gloo_work, TensorList outputs) {
    auto work = make_work(std::move(outputs));
    work->launched(as_works(std::move(gloo_work)));
    return work;
  }

 private:
  static Works as_works(c10::intrusive_ptr<Work> work) {
    return {std::move(work)};
  }
  static Works as_works(Works works) {
    return works;
  }

  std::exception_ptr refusal_error() const {
    try {
      TORCH_CHECK_VALUE(false, ProcessGroupOpenReg::kName, " ", op_, " on rank ", pg_.getRank(), ": ", *refusal_);
    } catch (...) {
      return std::current_exception();
    }
  }

  c10::intrusive_ptr<OpenRegWork> make_work(TensorList outputs) {
    return c10::make_intrusive<OpenRegWork>(
        pg_.getRank(), type_, op_, check_.device(), pg_.peers_, std::move(host_views_), std::move(outputs));
  }

  ProcessGroupOpenReg& pg_;
  const char* op_;
  OpType type_;
  at::openreg::DeviceCheck check_{op_};
  CallSignature signature_;
  std::optional<at::openreg::CpuAliases> views_;
  TensorList host_views_;
  std::optional<std::string> refusal_;
};

}  // namespace c10d::openreg
