#include "distributed/ProcessGroupOpenReg.h"

#include <utility>

#include <c10/util/Exception.h>

#include "distributed/CollectiveCall.h"
#include "distributed/CollectiveFailure.h"
#include "distributed/CollectiveLauncher.h"

namespace c10d::openreg {

namespace {

using TensorList = std::vector<at::Tensor>;
using TensorLists = std::vector<std::vector<at::Tensor>>;
using Works = std::vector<c10::intrusive_ptr<Work>>;

TensorList flattened(const TensorLists& lists) {
  TensorList all;
  for (const auto& tensors : lists) {
    all.insert(all.end(), tensors.begin(), tensors.end());
  }
  return all;
}

// gloo has no coalesced form of allgather_into_tensor and reduce_scatter_tensor:
// one gloo collective per (output, input) pair, issued in order, completing as
// one work.
template <typename Options>
c10::intrusive_ptr<Work> launch_pairwise(
    CollectiveCall& call, TensorList& outputs, TensorList& inputs, const Options& opts,
    c10::intrusive_ptr<Work> (Backend::*collective)(at::Tensor&, at::Tensor&, const Options&)) {
  return call.launch(
      opts.asyncOp, outputs,
      [host_outputs = call.view(outputs), host_inputs = call.view(inputs), opts, collective](Backend& gloo) mutable {
        Works works;
        for (size_t i = 0; i < host_outputs.size(); ++i) {
          works.push_back((gloo.*collective)(host_outputs[i], host_inputs[i], opts));
        }
        return works;
      });
}

}  // namespace

ProcessGroupOpenReg::ProcessGroupOpenReg(
    c10::intrusive_ptr<Store> store, c10::intrusive_ptr<Backend> gloo, int rank, int size)
    : Backend(rank, size), gloo_(std::move(gloo)) {
  TORCH_CHECK_VALUE(store, kName, ": a store is required");
  TORCH_CHECK_VALUE(gloo_, kName, ": a gloo backend is required");
  TORCH_CHECK_VALUE(
      gloo_->getRank() == rank && gloo_->getSize() == size, kName, ": the gloo backend is rank ", gloo_->getRank(),
      " of ", gloo_->getSize(), ", not rank ", rank, " of ", size);
  peers_ = std::make_shared<const PeerProcesses>(store, rank, size);
  launcher_ = std::make_unique<CollectiveLauncher>();
  init();
}

ProcessGroupOpenReg::~ProcessGroupOpenReg() = default;

namespace {

int64_t reduction(const ReduceOp& op) {
  return static_cast<int64_t>(op.op_);
}

}  // namespace

c10::intrusive_ptr<Work> ProcessGroupOpenReg::broadcast(TensorList& tensors, const BroadcastOptions& opts) {
  CollectiveCall call(*this, "broadcast", OpType::BROADCAST);
  call.option("root", opts.rootRank).same(tensors);
  return call.launch(opts.asyncOp, tensors, [hosts = call.view(tensors), opts](Backend& gloo) mutable {
    return gloo.broadcast(hosts, opts);
  });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allreduce(TensorList& tensors, const AllreduceOptions& opts) {
  CollectiveCall call(*this, "allreduce", OpType::ALLREDUCE);
  call.option("reduce_op", reduction(opts.reduceOp)).same(tensors);
  return call.launch(opts.asyncOp, tensors, [hosts = call.view(tensors), opts](Backend& gloo) mutable {
    return gloo.allreduce(hosts, opts);
  });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allreduce_coalesced(
    TensorList& tensors, const AllreduceCoalescedOptions& opts) {
  CollectiveCall call(*this, "allreduce_coalesced", OpType::ALLREDUCE_COALESCED);
  call.option("reduce_op", reduction(opts.reduceOp)).same(tensors, LayoutRule::kDense);
  return call.launch(opts.asyncOp, tensors, [hosts = call.view(tensors), opts](Backend& gloo) mutable {
    return gloo.allreduce_coalesced(hosts, opts);
  });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::reduce(TensorList& tensors, const ReduceOptions& opts) {
  CollectiveCall call(*this, "reduce", OpType::REDUCE);
  call.option("root", opts.rootRank).option("reduce_op", reduction(opts.reduceOp)).same(tensors);
  return call.launch(opts.asyncOp, tensors, [hosts = call.view(tensors), opts](Backend& gloo) mutable {
    return gloo.reduce(hosts, opts);
  });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allgather(
    TensorLists& outputs, TensorList& inputs, const AllgatherOptions& opts) {
  CollectiveCall call(*this, "allgather", OpType::ALLGATHER);
  call.same(inputs).same(outputs, LayoutRule::kCopied);
  return call.launch(
      opts.asyncOp, flattened(outputs),
      [host_outputs = call.view(outputs), host_inputs = call.view(inputs), opts](Backend& gloo) mutable {
        return gloo.allgather(host_outputs, host_inputs, opts);
      });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::_allgather_base(
    at::Tensor& output, at::Tensor& input, const AllgatherOptions& opts) {
  CollectiveCall call(*this, "allgather_into_tensor", OpType::_ALLGATHER_BASE);
  call.same(input).same(output);
  return call.launch(
      opts.asyncOp, {output},
      [host_output = call.view(output), host_input = call.view(input), opts](Backend& gloo) mutable {
        return gloo._allgather_base(host_output, host_input, opts);
      });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allgather_coalesced(
    TensorLists& outputs, TensorList& inputs, const AllgatherOptions& opts) {
  CollectiveCall call(*this, "allgather_coalesced", OpType::ALLGATHER_COALESCED);
  call.same(inputs).same(outputs, LayoutRule::kCopied);
  return call.launch(
      opts.asyncOp, flattened(outputs),
      [host_outputs = call.view(outputs), host_inputs = call.view(inputs), opts](Backend& gloo) mutable {
        return gloo.allgather_coalesced(host_outputs, host_inputs, opts);
      });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allgather_into_tensor_coalesced(
    TensorList& outputs, TensorList& inputs, const AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(
      outputs.size() == inputs.size(), kName, " allgather_into_tensor_coalesced: ", outputs.size(), " outputs for ",
      inputs.size(), " inputs");
  CollectiveCall call(*this, "allgather_into_tensor_coalesced", OpType::COALESCED);
  call.same(inputs).same(outputs);
  return launch_pairwise(call, outputs, inputs, opts, &Backend::_allgather_base);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::reduce_scatter_tensor_coalesced(
    TensorList& outputs, TensorList& inputs, const ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(
      outputs.size() == inputs.size(), kName, " reduce_scatter_tensor_coalesced: ", outputs.size(), " outputs for ",
      inputs.size(), " inputs");
  CollectiveCall call(*this, "reduce_scatter_tensor_coalesced", OpType::REDUCE_SCATTER_TENSOR_COALESCED);
  call.option("reduce_op", reduction(opts.reduceOp)).same(inputs).same(outputs);
  return launch_pairwise(call, outputs, inputs, opts, &Backend::_reduce_scatter_base);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::gather(
    TensorLists& outputs, TensorList& inputs, const GatherOptions& opts) {
  // Only the root passes outputs.
  CollectiveCall call(*this, "gather", OpType::GATHER);
  call.option("root", opts.rootRank).same(inputs).root_only(outputs, inputs, getRank() == opts.rootRank, "output");
  return call.launch(
      opts.asyncOp, flattened(outputs),
      [host_outputs = call.view(outputs), host_inputs = call.view(inputs), opts](Backend& gloo) mutable {
        return gloo.gather(host_outputs, host_inputs, opts);
      });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::scatter(
    TensorList& outputs, TensorLists& inputs, const ScatterOptions& opts) {
  // Only the root passes inputs.
  CollectiveCall call(*this, "scatter", OpType::SCATTER);
  call.option("root", opts.rootRank).same(outputs).root_only(inputs, outputs, getRank() == opts.rootRank, "input");
  return call.launch(
      opts.asyncOp, outputs,
      [host_outputs = call.view(outputs), host_inputs = call.view(inputs), opts](Backend& gloo) mutable {
        return gloo.scatter(host_outputs, host_inputs, opts);
      });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::reduce_scatter(
    TensorList& outputs, TensorLists& inputs, const ReduceScatterOptions& opts) {
  CollectiveCall call(*this, "reduce_scatter", OpType::REDUCE_SCATTER);
  call.option("reduce_op", reduction(opts.reduceOp)).same(outputs).same(inputs, LayoutRule::kCopied);
  return call.launch(
      opts.asyncOp, outputs,
      [host_outputs = call.view(outputs), host_inputs = call.view(inputs), opts](Backend& gloo) mutable {
        return gloo.reduce_scatter(host_outputs, host_inputs, opts);
      });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const ReduceScatterOptions& opts) {
  CollectiveCall call(*this, "reduce_scatter_tensor", OpType::_REDUCE_SCATTER_BASE);
  call.option("reduce_op", reduction(opts.reduceOp)).same(output).same(input);
  return call.launch(
      opts.asyncOp, {output},
      [host_output = call.view(output), host_input = call.view(input), opts](Backend& gloo) mutable {
        return gloo._reduce_scatter_base(host_output, host_input, opts);
      });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) {
  // With split sizes, each rank's tensors may differ in length.
  CollectiveCall call(*this, "alltoall_base", OpType::ALLTOALL_BASE);
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    call.same(output).same(input);
  } else {
    call.local(output).local(input);
  }
  return call.launch(
      opts.asyncOp, {output},
      [host_output = call.view(output), host_input = call.view(input), output_split_sizes, input_split_sizes,
       opts](Backend& gloo) mutable {
        return gloo.alltoall_base(host_output, host_input, output_split_sizes, input_split_sizes, opts);
      });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::alltoall(
    TensorList& outputs, TensorList& inputs, const AllToAllOptions& opts) {
  // gloo exchanges equal parts: one tensor per rank in each list, all of one
  // dtype and shape, which must then agree across ranks too.
  CollectiveCall call(*this, "alltoall", OpType::ALLTOALL);
  call.same(outputs).same(inputs);
  if (static_cast<int>(inputs.size()) != getSize() || outputs.size() != inputs.size()) {
    call.refuse(
        c10::str(
            "the input and output lists hold ", inputs.size(), " and ", outputs.size(),
            " tensors; each must hold one per rank (", getSize(), ")"));
  } else {
    call.equal_parts(inputs, inputs[0], "input").equal_parts(outputs, inputs[0], "output");
  }
  return call.launch(
      opts.asyncOp, outputs,
      [host_outputs = call.view(outputs), host_inputs = call.view(inputs), opts](Backend& gloo) mutable {
        return gloo.alltoall(host_outputs, host_inputs, opts);
      });
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::send(TensorList& tensors, int dst_rank, int tag) {
  CollectiveCall call(*this, "send", OpType::SEND);
  auto hosts = call.sent(tensors);
  return call.started(gloo_->send(hosts, dst_rank, tag), {});
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::recv(TensorList& tensors, int src_rank, int tag) {
  CollectiveCall call(*this, "recv", OpType::RECV);
  auto hosts = call.received(tensors);
  return call.started(gloo_->recv(hosts, src_rank, tag), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::recvAnysource(TensorList& tensors, int tag) {
  CollectiveCall call(*this, "recv_anysource", OpType::RECVANYSOURCE);
  auto hosts = call.received(tensors);
  return call.started(gloo_->recvAnysource(hosts, tag), tensors);
}

// Barriers take their place among the collectives (gloo's barrier waits for
// the work issued before it).
c10::intrusive_ptr<Work> ProcessGroupOpenReg::barrier(const BarrierOptions& opts) {
  c10::intrusive_ptr<Work> work;
  launcher_->run_here([&] { work = gloo_->barrier(opts); });
  return work;
}

void ProcessGroupOpenReg::monitoredBarrier(const BarrierOptions& opts, bool wait_all_ranks) {
  launcher_->run_here([&] { gloo_->monitoredBarrier(opts, wait_all_ranks); });
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

}  // namespace c10d::openreg
