#include "distributed/ProcessGroupOpenReg.h"

#include <optional>
#include <utility>

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "aten/DeviceCheck.h"
#include "aten/HostView.h"

namespace c10d::openreg {

namespace {

using TensorList = std::vector<at::Tensor>;
using TensorLists = std::vector<std::vector<at::Tensor>>;

// One or more gloo works over host views, seen as one c10d::Work on openreg
// tensors. It holds the host views (and so the scoped accesses) until it is
// destroyed, which is never before gloo has finished with them: gloo's own
// work holds them as well until it has run.
class OpenRegWork : public Work {
 public:
  OpenRegWork(
      int rank,
      OpType type,
      const char* op,
      c10::Device device,
      std::vector<c10::intrusive_ptr<Work>> gloo_works,
      TensorList host_views,
      TensorList outputs)
      : Work(rank, type),
        op_(op),
        device_(device),
        gloo_works_(std::move(gloo_works)),
        host_views_(std::move(host_views)),
        outputs_(std::move(outputs)) {}

  bool isCompleted() override {
    for (const auto& work : gloo_works_) {
      if (!work->isCompleted()) {
        return false;
      }
    }
    return true;
  }

  bool isSuccess() const override {
    for (const auto& work : gloo_works_) {
      if (!work->isSuccess()) {
        return false;
      }
    }
    return true;
  }

  std::exception_ptr exception() const override {
    for (const auto& work : gloo_works_) {
      if (auto error = work->exception()) {
        return error;
      }
    }
    return nullptr;
  }

  TensorList result() override {
    return outputs_;
  }

  // wait() has already ordered the caller after the collective (the device's
  // kernels run on the calling thread).
  void synchronize() override {}

  bool wait(std::chrono::milliseconds timeout) override {
    bool completed = true;
    for (const auto& work : gloo_works_) {
      try {
        completed = work->wait(timeout) && completed;
      } catch (c10::Error& error) {
        // gloo's message names the failure and the peer's address; this
        // says which collective, on which rank and device.
        error.add_context(c10::str(
            ProcessGroupOpenReg::kName, " ", op_, " on rank ", rank_, " (", device_, ") failed"));
        throw;
      }
    }
    return completed;
  }

  // As NCCL's: completes with the openreg tensors the collective wrote, on
  // the collective's device, so a continuation orders the current openreg
  // stream through the future's events.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!future_) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{device_});
      std::vector<c10::intrusive_ptr<c10::ivalue::Future>> gloo_futures;
      for (const auto& work : gloo_works_) {
        gloo_futures.push_back(work->getFuture());
      }
      auto done = gloo_futures.size() == 1 ? gloo_futures.front()
                                           : c10::collectAll(c10::List<c10::intrusive_ptr<c10::ivalue::Future>>(
                                                 std::move(gloo_futures)));
      done->addCallback([future = future_, outputs = outputs_](c10::ivalue::Future& gloo_future) {
        if (gloo_future.hasError()) {
          future->setError(gloo_future.exception_ptr());
        } else {
          future->markCompleted(c10::IValue(outputs));
        }
      });
    }
    return future_;
  }

  void abort() override {
    for (const auto& work : gloo_works_) {
      work->abort();
    }
  }

 private:
  const char* op_;
  c10::Device device_;
  std::vector<c10::intrusive_ptr<Work>> gloo_works_;
  TensorList host_views_;
  TensorList outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One collective call: checks that every tensor is on one openreg device,
// turns them into host views, and wraps gloo's work.
class Collective {
 public:
  Collective(const Backend& backend, const char* op, OpType type) : backend_(backend), op_(op), type_(type) {}

  // First every tensor of the call, so a mismatch raises before any view.
  Collective& on(const at::Tensor& tensor) {
    check_.check_written(tensor);
    return *this;
  }
  Collective& on(const TensorList& tensors) {
    for (const auto& tensor : tensors) {
      on(tensor);
    }
    return *this;
  }
  Collective& on(const TensorLists& lists) {
    for (const auto& tensors : lists) {
      on(tensors);
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

  c10::intrusive_ptr<Work> started(c10::intrusive_ptr<Work> gloo_work, TensorList outputs) {
    return started(std::vector<c10::intrusive_ptr<Work>>{std::move(gloo_work)}, std::move(outputs));
  }
  c10::intrusive_ptr<Work> started(std::vector<c10::intrusive_ptr<Work>> gloo_works, TensorList outputs) {
    return c10::make_intrusive<OpenRegWork>(
        backend_.getRank(),
        type_,
        op_,
        check_.device(),
        std::move(gloo_works),
        std::move(host_views_),
        std::move(outputs));
  }

 private:
  const Backend& backend_;
  const char* op_;
  OpType type_;
  at::openreg::DeviceCheck check_{op_};
  std::optional<at::openreg::HostViews> views_;
  TensorList host_views_;
};

TensorList flattened(const TensorLists& lists) {
  TensorList all;
  for (const auto& tensors : lists) {
    all.insert(all.end(), tensors.begin(), tensors.end());
  }
  return all;
}

} // namespace

ProcessGroupOpenReg::ProcessGroupOpenReg(c10::intrusive_ptr<Backend> gloo, int rank, int size)
    : Backend(rank, size), gloo_(std::move(gloo)) {
  TORCH_CHECK_VALUE(gloo_, kName, ": a gloo backend is required");
  TORCH_CHECK_VALUE(
      gloo_->getRank() == rank && gloo_->getSize() == size,
      kName, ": the gloo backend is rank ", gloo_->getRank(), " of ", gloo_->getSize(), ", not rank ", rank, " of ",
      size);
  init();
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::broadcast(TensorList& tensors, const BroadcastOptions& opts) {
  Collective call(*this, "broadcast", OpType::BROADCAST);
  auto hosts = call.on(tensors).view(tensors);
  return call.started(gloo_->broadcast(hosts, opts), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allreduce(TensorList& tensors, const AllreduceOptions& opts) {
  Collective call(*this, "allreduce", OpType::ALLREDUCE);
  auto hosts = call.on(tensors).view(tensors);
  return call.started(gloo_->allreduce(hosts, opts), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allreduce_coalesced(
    TensorList& tensors,
    const AllreduceCoalescedOptions& opts) {
  Collective call(*this, "allreduce_coalesced", OpType::ALLREDUCE_COALESCED);
  auto hosts = call.on(tensors).view(tensors);
  return call.started(gloo_->allreduce_coalesced(hosts, opts), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::reduce(TensorList& tensors, const ReduceOptions& opts) {
  Collective call(*this, "reduce", OpType::REDUCE);
  auto hosts = call.on(tensors).view(tensors);
  return call.started(gloo_->reduce(hosts, opts), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allgather(
    TensorLists& outputs,
    TensorList& inputs,
    const AllgatherOptions& opts) {
  Collective call(*this, "allgather", OpType::ALLGATHER);
  call.on(outputs).on(inputs);
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->allgather(host_outputs, host_inputs, opts), flattened(outputs));
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::_allgather_base(
    at::Tensor& output,
    at::Tensor& input,
    const AllgatherOptions& opts) {
  Collective call(*this, "allgather_into_tensor", OpType::_ALLGATHER_BASE);
  call.on(output).on(input);
  auto host_output = call.view(output);
  auto host_input = call.view(input);
  return call.started(gloo_->_allgather_base(host_output, host_input, opts), {output});
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allgather_coalesced(
    TensorLists& outputs,
    TensorList& inputs,
    const AllgatherOptions& opts) {
  Collective call(*this, "allgather_coalesced", OpType::ALLGATHER_COALESCED);
  call.on(outputs).on(inputs);
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->allgather_coalesced(host_outputs, host_inputs, opts), flattened(outputs));
}

// gloo has no coalesced form of these two: one gloo collective per pair,
// issued in order, completing as one work.
c10::intrusive_ptr<Work> ProcessGroupOpenReg::allgather_into_tensor_coalesced(
    TensorList& outputs,
    TensorList& inputs,
    const AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(
      outputs.size() == inputs.size(), kName, " allgather_into_tensor_coalesced: ", outputs.size(),
      " outputs for ", inputs.size(), " inputs");
  Collective call(*this, "allgather_into_tensor_coalesced", OpType::COALESCED);
  call.on(outputs).on(inputs);
  std::vector<c10::intrusive_ptr<Work>> works;
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto host_output = call.view(outputs[i]);
    auto host_input = call.view(inputs[i]);
    works.push_back(gloo_->_allgather_base(host_output, host_input, opts));
  }
  return call.started(std::move(works), outputs);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::reduce_scatter_tensor_coalesced(
    TensorList& outputs,
    TensorList& inputs,
    const ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(
      outputs.size() == inputs.size(), kName, " reduce_scatter_tensor_coalesced: ", outputs.size(),
      " outputs for ", inputs.size(), " inputs");
  Collective call(*this, "reduce_scatter_tensor_coalesced", OpType::REDUCE_SCATTER_TENSOR_COALESCED);
  call.on(outputs).on(inputs);
  std::vector<c10::intrusive_ptr<Work>> works;
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto host_output = call.view(outputs[i]);
    auto host_input = call.view(inputs[i]);
    works.push_back(gloo_->_reduce_scatter_base(host_output, host_input, opts));
  }
  return call.started(std::move(works), outputs);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::gather(
    TensorLists& outputs,
    TensorList& inputs,
    const GatherOptions& opts) {
  Collective call(*this, "gather", OpType::GATHER);
  call.on(outputs).on(inputs);
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->gather(host_outputs, host_inputs, opts), flattened(outputs));
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::scatter(
    TensorList& outputs,
    TensorLists& inputs,
    const ScatterOptions& opts) {
  Collective call(*this, "scatter", OpType::SCATTER);
  call.on(outputs).on(inputs);
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->scatter(host_outputs, host_inputs, opts), outputs);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::reduce_scatter(
    TensorList& outputs,
    TensorLists& inputs,
    const ReduceScatterOptions& opts) {
  Collective call(*this, "reduce_scatter", OpType::REDUCE_SCATTER);
  call.on(outputs).on(inputs);
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->reduce_scatter(host_outputs, host_inputs, opts), outputs);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::_reduce_scatter_base(
    at::Tensor& output,
    at::Tensor& input,
    const ReduceScatterOptions& opts) {
  Collective call(*this, "reduce_scatter_tensor", OpType::_REDUCE_SCATTER_BASE);
  call.on(output).on(input);
  auto host_output = call.view(output);
  auto host_input = call.view(input);
  return call.started(gloo_->_reduce_scatter_base(host_output, host_input, opts), {output});
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::alltoall_base(
    at::Tensor& output,
    at::Tensor& input,
    std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes,
    const AllToAllOptions& opts) {
  Collective call(*this, "alltoall_base", OpType::ALLTOALL_BASE);
  call.on(output).on(input);
  auto host_output = call.view(output);
  auto host_input = call.view(input);
  return call.started(
      gloo_->alltoall_base(host_output, host_input, output_split_sizes, input_split_sizes, opts), {output});
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::alltoall(
    TensorList& outputs,
    TensorList& inputs,
    const AllToAllOptions& opts) {
  Collective call(*this, "alltoall", OpType::ALLTOALL);
  call.on(outputs).on(inputs);
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->alltoall(host_outputs, host_inputs, opts), outputs);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::send(TensorList& tensors, int dst_rank, int tag) {
  Collective call(*this, "send", OpType::SEND);
  auto hosts = call.on(tensors).view(tensors);
  return call.started(gloo_->send(hosts, dst_rank, tag), {});
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::recv(TensorList& tensors, int src_rank, int tag) {
  Collective call(*this, "recv", OpType::RECV);
  auto hosts = call.on(tensors).view(tensors);
  return call.started(gloo_->recv(hosts, src_rank, tag), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::recvAnysource(TensorList& tensors, int tag) {
  Collective call(*this, "recv_anysource", OpType::RECVANYSOURCE);
  auto hosts = call.on(tensors).view(tensors);
  return call.started(gloo_->recvAnysource(hosts, tag), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::barrier(const BarrierOptions& opts) {
  return gloo_->barrier(opts);
}

void ProcessGroupOpenReg::monitoredBarrier(const BarrierOptions& opts, bool wait_all_ranks) {
  gloo_->monitoredBarrier(opts, wait_all_ranks);
}

void ProcessGroupOpenReg::setSequenceNumberForGroup() {
  gloo_->setSequenceNumberForGroup();
}

uint64_t ProcessGroupOpenReg::getSequenceNumberForGroup() {
  return gloo_->getSequenceNumberForGroup();
}

void ProcessGroupOpenReg::setTimeout(std::chrono::milliseconds timeout) {
  gloo_->setTimeout(timeout);
}

void ProcessGroupOpenReg::abort() {
  gloo_->abort();
}

void ProcessGroupOpenReg::shutdown() {
  gloo_->shutdown();
}

} // namespace c10d::openreg
