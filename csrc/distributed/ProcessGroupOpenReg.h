#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

// The c10d backend of the openreg device ("orccl"): gloo's collectives, run
// directly on openreg memory.
//
// openreg device memory is host memory behind a protected mapping, so a
// collective needs no staging copy: each openreg tensor becomes a CPU tensor
// over the runtime's host view of the same bytes (a scoped access, see
// aten/CpuAliases.h), and gloo reads and writes those views. The wheel ships no
// gloo headers, so gloo is held as a plain c10d::Backend, created in Python
// (torch.distributed.ProcessGroupGloo) and handed in.
//
// Stream semantics are NCCL's with CUDA streams, on a device whose kernels run
// on the calling thread: a collective starts once the work queued on the
// current openreg stream has run (as every host-executed openreg kernel does),
// and Work::wait() returns once gloo has finished, so whatever the caller
// issues to the stream afterwards follows the collective. The host views stay
// open until the gloo work completes (the Work holds them).
//
// Before each collective the ranks compare what they pass (operation, options,
// tensor shapes and dtypes) in one small gloo allgather (ArgumentAgreement.h):
// gloo itself checks none of it, and a mismatch there hangs, corrupts, or
// kills the process from a gloo thread. A mismatch raises on every rank,
// naming each rank's arguments. gloo moves most tensors as raw memory from
// data_ptr(), whatever their strides, so such a tensor must be contiguous in
// its suggested memory format, as NCCL requires (LayoutRule, CollectiveCall.h);
// point-to-point operations take any tensor, through a dense copy. An
// asynchronous collective agrees and launches on the group's launcher thread
// (CollectiveLauncher.h), so the call returns at once. A failed collective
// names the peers that are no longer running.
namespace c10d::openreg {

class CollectiveCall;
class CollectiveLauncher;
class PeerProcesses;

class ProcessGroupOpenReg : public Backend {
 public:
  // The name under which torch_openreg registers the backend.
  static constexpr const char* kName = "orccl";

  // `store` is the group's store, which gloo was created over too.
  ProcessGroupOpenReg(c10::intrusive_ptr<Store> store, c10::intrusive_ptr<Backend> gloo, int rank, int size);
  // Makes the launches already queued first.
  ~ProcessGroupOpenReg() override;

  const std::string getBackendName() const override {
    return kName;
  }
  c10::intrusive_ptr<Options> getBackendOptions() override {
    return gloo_->getBackendOptions();
  }
  // The gloo backend the collectives run on.
  const c10::intrusive_ptr<Backend>& gloo() const {
    return gloo_;
  }

  c10::intrusive_ptr<Work> broadcast(std::vector<at::Tensor>& tensors, const BroadcastOptions& opts) override;
  c10::intrusive_ptr<Work> allreduce(std::vector<at::Tensor>& tensors, const AllreduceOptions& opts) override;
  c10::intrusive_ptr<Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<Work> reduce(std::vector<at::Tensor>& tensors, const ReduceOptions& opts) override;
  c10::intrusive_ptr<Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const AllgatherOptions& opts) override;
  c10::intrusive_ptr<Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const AllgatherOptions& opts) override;
  c10::intrusive_ptr<Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const AllgatherOptions& opts) override;
  c10::intrusive_ptr<Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const AllgatherOptions& opts) override;
  c10::intrusive_ptr<Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const GatherOptions& opts) override;
  c10::intrusive_ptr<Work> scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const ScatterOptions& opts) override;
  c10::intrusive_ptr<Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<Work> alltoall_base(
      at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
      std::vector<int64_t>& input_split_sizes, const AllToAllOptions& opts) override;
  c10::intrusive_ptr<Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const AllToAllOptions& opts) override;
  c10::intrusive_ptr<Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  // Barriers exchange no tensor data: gloo's own.
  c10::intrusive_ptr<Work> barrier(const BarrierOptions& opts) override;
  void monitoredBarrier(const BarrierOptions& opts, bool wait_all_ranks) override;

  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  void abort() override;
  void shutdown() override;

 private:
  friend class CollectiveCall;

  c10::intrusive_ptr<Backend> gloo_;
  std::shared_ptr<const PeerProcesses> peers_;
  // Destroyed first: its queued launches use gloo_ and peers_.
  std::unique_ptr<CollectiveLauncher> launcher_;
};

}  // namespace c10d::openreg
