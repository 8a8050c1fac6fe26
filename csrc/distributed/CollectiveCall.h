#pragma once

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/MemoryOverlap.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>

#include "aten/DeviceCheck.h"
#include "aten/CpuAliases.h"
#include "distributed/ArgumentAgreement.h"
#include "distributed/CollectiveLauncher.h"
#include "distributed/OpenRegWork.h"
#include "distributed/ProcessGroupOpenReg.h"

// One call of an orccl operation, from the arguments to its Work: checks that
// every tensor is on one openreg device and has a layout gloo can use,
// describes the arguments for the ranks' agreement, turns the tensors into
// host views, and launches gloo's operation on them once the ranks agree.
namespace c10d::openreg {

// The layouts a collective's tensor may have, from how gloo uses its memory.
enum class LayoutRule {
  // gloo reads or writes numel() elements from data_ptr(), so the tensor must
  // be contiguous in its suggested memory format (NCCL's rule for a
  // collective's tensors), and the ranks agree on that format.
  kContiguous,
  // gloo copies the tensor element by element through a flat buffer
  // (all_gather's outputs, reduce_scatter's inputs, which NCCL copies too):
  // any layout.
  kCopied,
  // Copied too, but NCCL's coalesced all_reduce takes non-overlapping, dense
  // tensors only.
  kDense,
};

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
  // Tensors every rank passes alike (same count, dtypes and shapes), each
  // checked against `rule`.
  CollectiveCall& same(const at::Tensor& tensor, LayoutRule rule = LayoutRule::kContiguous) {
    checked(tensor, rule);
    signature_.same_shape(
        tensor, rule == LayoutRule::kContiguous ? std::optional(memory_format(tensor)) : std::nullopt);
    return *this;
  }
  CollectiveCall& same(const TensorList& tensors, LayoutRule rule = LayoutRule::kContiguous) {
    for (const auto& tensor : tensors) {
      same(tensor, rule);
    }
    return *this;
  }
  CollectiveCall& same(const TensorLists& lists, LayoutRule rule = LayoutRule::kContiguous) {
    for (const auto& tensors : lists) {
      same(tensors, rule);
    }
    return *this;
  }
  // A tensor whose shape may differ across ranks (all-to-all with split
  // sizes): only its dtype must agree.
  CollectiveCall& local(const at::Tensor& tensor) {
    checked(tensor, LayoutRule::kContiguous);
    signature_.same_dtype(tensor);
    return *this;
  }
  // Tensors only the root passes (gather's outputs, scatter's inputs): one
  // list of a tensor per rank, each of `like`'s dtype, shape and memory
  // format; the other ranks pass none. gloo checks this on the root alone,
  // where its error would leave the other ranks waiting for the root until
  // the group's timeout, so a wrong list is refused here (refuse()).
  CollectiveCall& root_only(const TensorLists& lists, const TensorList& like, bool is_root, const char* what) {
    for (const auto& tensors : lists) {
      for (const auto& tensor : tensors) {
        checked(tensor, LayoutRule::kContiguous);
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
  // Tensors of a list that must each have `like`'s dtype, shape and memory
  // format (gather's and scatter's root list, all-to-all's lists: gloo moves
  // equal parts of raw memory).
  CollectiveCall& equal_parts(const TensorList& tensors, const at::Tensor& like, const char* what) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& tensor = tensors[i];
      if (tensor.scalar_type() != like.scalar_type() || tensor.sizes() != like.sizes() ||
          memory_format(tensor) != memory_format(like)) {
        refuse(
            c10::str(
                what, " ", i, " is ", described(tensor), ", not ", described(like),
                ": every tensor of the list must have the same dtype, shape and memory format"));
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

  // The host views a point-to-point operation sends from and receives into.
  // Like NCCL, orccl takes a tensor that is not contiguous in its suggested
  // memory format, with NCCL's warning. Unlike NCCL, which moves numel()
  // elements from its data_ptr(), it never reads or writes outside the
  // tensor's elements: such a tensor is sent from a dense copy in that
  // format, and received into a dense buffer that the Work copies into it
  // once gloo is done.
  TensorList sent(const TensorList& tensors) {
    TensorList hosts;
    for (const auto& tensor : tensors) {
      check_.check_written(tensor);
      hosts.push_back(view(dense_for_p2p(tensor) ? tensor : staged(tensor.contiguous(tensor.suggest_memory_format()))));
    }
    return hosts;
  }
  TensorList received(const TensorList& tensors) {
    TensorList hosts;
    for (const auto& tensor : tensors) {
      check_.check_written(tensor);
      if (dense_for_p2p(tensor)) {
        hosts.push_back(view(tensor));
        continue;
      }
      TORCH_CHECK_VALUE(
          at::has_internal_overlap(tensor) != at::MemOverlap::Yes, ProcessGroupOpenReg::kName, " ", op_, " on rank ",
          pg_.getRank(), ": a ", with_strides(tensor),
          " cannot receive a message: some of its elements share memory (pass a tensor of distinct elements, e.g. a ",
          "clone())");
      hosts.push_back(view(staged(at::empty_like(tensor, tensor.suggest_memory_format()))));
      copies_back_.emplace_back(view(tensor), hosts.back());
    }
    return hosts;
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
  // The memory format in which a tensor contiguous in its suggested one lays
  // out its bytes (Contiguous for one contiguous in both).
  static at::MemoryFormat memory_format(const at::Tensor& tensor) {
    return tensor.is_contiguous() ? at::MemoryFormat::Contiguous : tensor.suggest_memory_format();
  }

  // "Float[2, 3]", with the memory format unless it is Contiguous, as the
  // agreement describes a tensor.
  static std::string described(const at::Tensor& tensor) {
    const auto format = memory_format(tensor);
    return format == at::MemoryFormat::Contiguous ? c10::str(tensor.scalar_type(), tensor.sizes())
                                                  : c10::str(tensor.scalar_type(), tensor.sizes(), " ", format);
  }

  // "Float[4] tensor with strides [4]".
  static std::string with_strides(const at::Tensor& tensor) {
    return c10::str(tensor.scalar_type(), tensor.sizes(), " tensor with strides ", tensor.strides());
  }

  void checked(const at::Tensor& tensor, LayoutRule rule) {
    check_.check_written(tensor);
    if (rule == LayoutRule::kContiguous && !tensor.is_contiguous(tensor.suggest_memory_format())) {
      refuse(c10::str("Tensors must be contiguous, as NCCL requires: got a ", with_strides(tensor)));
    } else if (rule == LayoutRule::kDense && !tensor.is_non_overlapping_and_dense()) {
      refuse(c10::str("Tensors must be non-overlapping and dense, as NCCL requires: got a ", with_strides(tensor)));
    }
  }

  // Keeps a dense copy alive as long as the host views borrow it (views_).
  const at::Tensor& staged(at::Tensor dense) {
    return staged_.emplace_back(std::move(dense));
  }

  bool dense_for_p2p(const at::Tensor& tensor) const {
    if (tensor.is_contiguous(tensor.suggest_memory_format())) {
      return true;
    }
    TORCH_WARN_ONCE(
        "Detected non-contiguous tensor in P2P operations. It is user responsibility to guarantee that source and "
        "destination tensors have the same contiguity format. (",
        ProcessGroupOpenReg::kName, " ", op_, " of a ", with_strides(tensor),
        ": its elements travel in its suggested memory format, ", tensor.suggest_memory_format(), ")");
    return false;
  }

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
    std::function<void()> finish;
    if (!copies_back_.empty()) {
      finish = [copies = std::move(copies_back_)]() mutable {
        for (auto& [tensor, buffer] : copies) {
          tensor.copy_(buffer);
        }
      };
    }
    return c10::make_intrusive<OpenRegWork>(
        pg_.getRank(), type_, op_, check_.device(), pg_.peers_, std::move(host_views_), std::move(outputs),
        std::move(finish));
  }

  ProcessGroupOpenReg& pg_;
  const char* op_;
  OpType type_;
  at::openreg::DeviceCheck check_{op_};
  CallSignature signature_;
  // Before views_, which borrows them.
  TensorList staged_;
  std::optional<at::openreg::CpuAliases> views_;
  TensorList host_views_;
  // (host view of a received tensor, of its dense buffer) pairs.
  std::vector<std::pair<at::Tensor, at::Tensor>> copies_back_;
  std::optional<std::string> refusal_;
};

}  // namespace c10d::openreg
