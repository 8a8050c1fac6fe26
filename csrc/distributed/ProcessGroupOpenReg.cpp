#include "distributed/ProcessGroupOpenReg.h"

#include <algorithm>
#include <cerrno>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include <signal.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "aten/DeviceCheck.h"
#include "aten/HostView.h"

namespace c10d::openreg {

// Which process each rank of the group runs in, so that a failed collective
// can say which peers are gone: at creation each rank publishes its host name
// and process id in the group's store and reads the others' (the store may be
// gone by the time a collective fails: its host may be the rank that died).
// After a failure, a peer on this host whose process no longer exists is
// named; gloo's own message names the peer's address.
class PeerProcesses {
 public:
  PeerProcesses(const c10::intrusive_ptr<Store>& store, int rank, int size) {
    const std::string host = host_name();
    const std::string mine = host + "\n" + std::to_string(::getpid());
    store->set(key(rank), std::vector<uint8_t>(mine.begin(), mine.end()));
    local_pids_.assign(size, 0);
    for (int peer = 0; peer < size; ++peer) {
      const std::vector<uint8_t> value = store->get(key(peer));
      const std::string text(value.begin(), value.end());
      const size_t newline = text.find('\n');
      if (peer != rank && newline != std::string::npos && text.substr(0, newline) == host) {
        local_pids_[peer] = static_cast<pid_t>(std::stoll(text.substr(newline + 1)));
      }
    }
  }

  // "; rank 1 (process 4242 on this host) is no longer running" for each
  // such peer, or "".
  std::string exited() const {
    std::string found;
    for (size_t peer = 0; peer < local_pids_.size(); ++peer) {
      if (local_pids_[peer] != 0 && !running(local_pids_[peer])) {
        found += c10::str("; rank ", peer, " (process ", local_pids_[peer], " on this host) is no longer running");
      }
    }
    return found;
  }

 private:
  static std::string key(int rank) {
    return "orccl_process_" + std::to_string(rank);
  }
  // An exited process that its parent has not reaped yet is a zombie: gone.
  static bool running(pid_t pid) {
    if (::kill(pid, 0) != 0) {
      return errno != ESRCH;
    }
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t name_end = line.rfind(") ");
    return name_end == std::string::npos || (line[name_end + 2] != 'Z' && line[name_end + 2] != 'X');
  }
  static std::string host_name() {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    return name;
  }

  // Process ids of the peers on this host (0 elsewhere and for this rank).
  std::vector<pid_t> local_pids_;
};

namespace {

using TensorList = std::vector<at::Tensor>;
using TensorLists = std::vector<std::vector<at::Tensor>>;

// What a failed collective adds to gloo's message.
std::string failure_context(const char* op, int rank, c10::Device device, const PeerProcesses& peers) {
  return c10::str(ProcessGroupOpenReg::kName, " ", op, " on rank ", rank, " (", device, ") failed", peers.exited());
}

// Rethrows the exception being handled with `context` added: a c10::Error
// keeps its type; gloo's transport errors (std::exception) become
// DistBackendError, as torch.distributed reports backend failures.
[[noreturn]] void rethrow_with(const std::string& context) {
  try {
    throw;
  } catch (c10::Error& error) {
    error.add_context(context);
    throw;
  } catch (const std::exception& error) {
    TORCH_CHECK_WITH(DistBackendError, false, error.what(), "\n", context);
  }
}

// One or more gloo works over host views, seen as one c10d::Work on openreg
// tensors. It holds the host views (and so the scoped accesses and the device
// storages) until it is destroyed; gloo's own work holds them too until it has
// run, so they stay open until gloo is done with them even if the caller drops
// this Work first.
class OpenRegWork : public Work {
 public:
  OpenRegWork(
      int rank,
      OpType type,
      const char* op,
      c10::Device device,
      std::shared_ptr<const PeerProcesses> peers,
      std::vector<c10::intrusive_ptr<Work>> gloo_works,
      TensorList host_views,
      TensorList outputs)
      : Work(rank, type),
        op_(op),
        device_(device),
        peers_(std::move(peers)),
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
      } catch (...) {
        rethrow_with(failure_context(op_, rank_, device_, *peers_));
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
      done->addCallback([future = future_,
                         outputs = outputs_,
                         context = [op = op_, rank = rank_, device = device_, peers = peers_] {
                           return failure_context(op, rank, device, *peers);
                         }](c10::ivalue::Future& gloo_future) {
        if (!gloo_future.hasError()) {
          future->markCompleted(c10::IValue(outputs));
          return;
        }
        try {
          try {
            std::rethrow_exception(gloo_future.exception_ptr());
          } catch (...) {
            rethrow_with(context());
          }
        } catch (...) {
          future->setError(std::current_exception());
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
  std::shared_ptr<const PeerProcesses> peers_;
  std::vector<c10::intrusive_ptr<Work>> gloo_works_;
  TensorList host_views_;
  TensorList outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// 64-bit FNV-1a over the signature's words.
int64_t fingerprint(const std::vector<int64_t>& words) {
  uint64_t hash = 14695981039346656037ull;
  for (int64_t word : words) {
    for (int byte = 0; byte < 8; ++byte) {
      hash = (hash ^ ((static_cast<uint64_t>(word) >> (8 * byte)) & 0xff)) * 1099511628211ull;
    }
  }
  return static_cast<int64_t>(hash);
}

} // namespace

// One collective call: checks that every tensor is on one openreg device,
// agrees with the other ranks on the arguments, turns the tensors into host
// views, and wraps gloo's work.
class ProcessGroupOpenReg::Collective {
 public:
  Collective(ProcessGroupOpenReg& pg, const char* op, OpType type) : pg_(pg), op_(op), type_(type) {
    signature_.push_back(static_cast<int64_t>(type));
  }

  // An option every rank must pass alike (root rank, reduction).
  Collective& option(const char* name, int64_t value) {
    option_names_.push_back(name);
    signature_.push_back(value);
    return *this;
  }
  // Tensors every rank passes alike (same count, dtypes and shapes).
  Collective& same(const at::Tensor& tensor) {
    check_.check_written(tensor);
    describe(tensor, true);
    return *this;
  }
  Collective& same(const TensorList& tensors) {
    for (const auto& tensor : tensors) {
      same(tensor);
    }
    return *this;
  }
  Collective& same(const TensorLists& lists) {
    for (const auto& tensors : lists) {
      same(tensors);
    }
    return *this;
  }
  // Tensors whose shapes may differ across ranks (all-to-all parts, which
  // split sizes make uneven): only their dtype must agree.
  Collective& local(const at::Tensor& tensor) {
    check_.check_written(tensor);
    describe(tensor, false);
    return *this;
  }
  Collective& local(const TensorList& tensors) {
    for (const auto& tensor : tensors) {
      local(tensor);
    }
    return *this;
  }

  // Tensors only the root passes (gather's outputs, scatter's inputs).
  Collective& root_only(const TensorLists& lists) {
    for (const auto& tensors : lists) {
      for (const auto& tensor : tensors) {
        check_.check_written(tensor);
      }
    }
    return *this;
  }

  // Compares the signatures of every rank (one small gloo allgather of CPU
  // tensors); raises on every rank if they differ.
  void agree() {
    const int size = pg_.getSize();
    if (size == 1) {
      return;
    }
    at::Tensor mine = at::zeros({kRecord}, at::kLong);
    int64_t* record = mine.data_ptr<int64_t>();
    record[0] = fingerprint(signature_);
    record[1] = static_cast<int64_t>(signature_.size());
    std::copy_n(signature_.begin(), std::min<size_t>(signature_.size(), kRecord - 2), record + 2);
    at::Tensor all = at::empty({size * kRecord}, at::kLong);
    try {
      pg_.gloo_->_allgather_base(all, mine, AllgatherOptions())->wait();
    } catch (...) {
      rethrow_with(failure_context(op_, pg_.getRank(), check_.device(), *pg_.peers_));
    }
    const int64_t* records = all.const_data_ptr<int64_t>();
    bool agreed = true;
    for (int r = 0; r < size; ++r) {
      agreed = agreed && std::equal(records, records + 2, records + r * kRecord);
    }
    if (!agreed) {
      std::string ranks;
      for (int r = 0; r < size; ++r) {
        ranks += c10::str(r == 0 ? "" : ", ", "rank ", r, ": ", describe_record(records + r * kRecord));
      }
      TORCH_CHECK_VALUE(
          false, ProcessGroupOpenReg::kName, " ", op_, " on rank ", pg_.getRank(),
          ": the ranks passed different arguments (every rank must pass the same operation, options, and "
          "tensor dtypes and shapes): ",
          ranks);
    }
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
        pg_.getRank(),
        type_,
        op_,
        check_.device(),
        pg_.peers_,
        std::move(gloo_works),
        std::move(host_views_),
        std::move(outputs));
  }

 private:
  // Words exchanged per rank: fingerprint, signature length, and as much of
  // the signature as fits (for the error message).
  static constexpr int64_t kRecord = 32;
  // Signature tensor entries: a marker, the dtype, and for tensors whose
  // shape must agree, the dimension count and sizes.
  static constexpr int64_t kSameShape = -1;
  static constexpr int64_t kAnyShape = -2;

  void describe(const at::Tensor& tensor, bool shape_matters) {
    signature_.push_back(shape_matters ? kSameShape : kAnyShape);
    signature_.push_back(static_cast<int64_t>(tensor.scalar_type()));
    if (shape_matters) {
      signature_.push_back(tensor.dim());
      signature_.insert(signature_.end(), tensor.sizes().begin(), tensor.sizes().end());
    }
  }

  // A rank's record as text: "allreduce(reduce_op=0; Float[4], Float[2, 3])".
  std::string describe_record(const int64_t* record) const {
    const int64_t length = record[1];
    const int64_t known = std::min<int64_t>(length, kRecord - 2);
    const int64_t* words = record + 2;
    std::ostringstream text;
    text << opTypeToString(static_cast<OpType>(words[0])) << "(";
    // Options are named for records of this rank's operation.
    const bool same_operation = words[0] == signature_[0];
    int64_t i = 1;
    while (i < known && words[i] >= 0) {
      const size_t o = static_cast<size_t>(i - 1);
      text << (i == 1 ? "" : ", ") << (same_operation && o < option_names_.size() ? option_names_[o] : "option")
           << "=" << words[i];
      ++i;
    }
    text << ";";
    const char* separator = " ";
    while (i + 1 < known) {
      const bool shape_matters = words[i] == kSameShape;
      text << separator << static_cast<c10::ScalarType>(words[i + 1]);
      i += 2;
      if (shape_matters && i < known) {
        const int64_t dims = words[i++];
        text << "[";
        for (int64_t d = 0; d < dims && i < known; ++d) {
          text << (d == 0 ? "" : ", ") << words[i++];
        }
        text << "]";
      }
      separator = ", ";
    }
    text << (known < length ? " ...)" : ")");
    return text.str();
  }

  ProcessGroupOpenReg& pg_;
  const char* op_;
  OpType type_;
  at::openreg::DeviceCheck check_{op_};
  std::vector<int64_t> signature_;
  std::vector<const char*> option_names_;
  std::optional<at::openreg::HostViews> views_;
  TensorList host_views_;
};

namespace {

TensorList flattened(const TensorLists& lists) {
  TensorList all;
  for (const auto& tensors : lists) {
    all.insert(all.end(), tensors.begin(), tensors.end());
  }
  return all;
}

} // namespace

ProcessGroupOpenReg::ProcessGroupOpenReg(
    c10::intrusive_ptr<Store> store,
    c10::intrusive_ptr<Backend> gloo,
    int rank,
    int size)
    : Backend(rank, size), gloo_(std::move(gloo)) {
  TORCH_CHECK_VALUE(store, kName, ": a store is required");
  TORCH_CHECK_VALUE(gloo_, kName, ": a gloo backend is required");
  TORCH_CHECK_VALUE(
      gloo_->getRank() == rank && gloo_->getSize() == size,
      kName, ": the gloo backend is rank ", gloo_->getRank(), " of ", gloo_->getSize(), ", not rank ", rank, " of ",
      size);
  peers_ = std::make_shared<const PeerProcesses>(store, rank, size);
  init();
}

namespace {

int64_t reduction(const ReduceOp& op) {
  return static_cast<int64_t>(op.op_);
}

} // namespace

c10::intrusive_ptr<Work> ProcessGroupOpenReg::broadcast(TensorList& tensors, const BroadcastOptions& opts) {
  Collective call(*this, "broadcast", OpType::BROADCAST);
  call.option("root", opts.rootRank).same(tensors).agree();
  auto hosts = call.view(tensors);
  return call.started(gloo_->broadcast(hosts, opts), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allreduce(TensorList& tensors, const AllreduceOptions& opts) {
  Collective call(*this, "allreduce", OpType::ALLREDUCE);
  call.option("reduce_op", reduction(opts.reduceOp)).same(tensors).agree();
  auto hosts = call.view(tensors);
  return call.started(gloo_->allreduce(hosts, opts), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allreduce_coalesced(
    TensorList& tensors,
    const AllreduceCoalescedOptions& opts) {
  Collective call(*this, "allreduce_coalesced", OpType::ALLREDUCE_COALESCED);
  call.option("reduce_op", reduction(opts.reduceOp)).same(tensors).agree();
  auto hosts = call.view(tensors);
  return call.started(gloo_->allreduce_coalesced(hosts, opts), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::reduce(TensorList& tensors, const ReduceOptions& opts) {
  Collective call(*this, "reduce", OpType::REDUCE);
  call.option("root", opts.rootRank).option("reduce_op", reduction(opts.reduceOp)).same(tensors).agree();
  auto hosts = call.view(tensors);
  return call.started(gloo_->reduce(hosts, opts), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allgather(
    TensorLists& outputs,
    TensorList& inputs,
    const AllgatherOptions& opts) {
  Collective call(*this, "allgather", OpType::ALLGATHER);
  call.same(inputs).same(outputs).agree();
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->allgather(host_outputs, host_inputs, opts), flattened(outputs));
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::_allgather_base(
    at::Tensor& output,
    at::Tensor& input,
    const AllgatherOptions& opts) {
  Collective call(*this, "allgather_into_tensor", OpType::_ALLGATHER_BASE);
  call.same(input).same(output).agree();
  auto host_output = call.view(output);
  auto host_input = call.view(input);
  return call.started(gloo_->_allgather_base(host_output, host_input, opts), {output});
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::allgather_coalesced(
    TensorLists& outputs,
    TensorList& inputs,
    const AllgatherOptions& opts) {
  Collective call(*this, "allgather_coalesced", OpType::ALLGATHER_COALESCED);
  call.same(inputs).same(outputs).agree();
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
  call.same(inputs).same(outputs).agree();
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
  call.option("reduce_op", reduction(opts.reduceOp)).same(inputs).same(outputs).agree();
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
  // Only the root passes outputs.
  Collective call(*this, "gather", OpType::GATHER);
  call.option("root", opts.rootRank).same(inputs).root_only(outputs).agree();
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->gather(host_outputs, host_inputs, opts), flattened(outputs));
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::scatter(
    TensorList& outputs,
    TensorLists& inputs,
    const ScatterOptions& opts) {
  // Only the root passes inputs.
  Collective call(*this, "scatter", OpType::SCATTER);
  call.option("root", opts.rootRank).same(outputs).root_only(inputs).agree();
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->scatter(host_outputs, host_inputs, opts), outputs);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::reduce_scatter(
    TensorList& outputs,
    TensorLists& inputs,
    const ReduceScatterOptions& opts) {
  Collective call(*this, "reduce_scatter", OpType::REDUCE_SCATTER);
  call.option("reduce_op", reduction(opts.reduceOp)).same(outputs).same(inputs).agree();
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->reduce_scatter(host_outputs, host_inputs, opts), outputs);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::_reduce_scatter_base(
    at::Tensor& output,
    at::Tensor& input,
    const ReduceScatterOptions& opts) {
  Collective call(*this, "reduce_scatter_tensor", OpType::_REDUCE_SCATTER_BASE);
  call.option("reduce_op", reduction(opts.reduceOp)).same(output).same(input).agree();
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
  // With split sizes, each rank's tensors may differ in length.
  Collective call(*this, "alltoall_base", OpType::ALLTOALL_BASE);
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    call.same(output).same(input);
  } else {
    call.local(output).local(input);
  }
  call.agree();
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
  call.local(outputs).local(inputs).agree();
  auto host_outputs = call.view(outputs);
  auto host_inputs = call.view(inputs);
  return call.started(gloo_->alltoall(host_outputs, host_inputs, opts), outputs);
}

// Point-to-point operations involve two ranks: nothing to agree on with the
// group.
c10::intrusive_ptr<Work> ProcessGroupOpenReg::send(TensorList& tensors, int dst_rank, int tag) {
  Collective call(*this, "send", OpType::SEND);
  auto hosts = call.local(tensors).view(tensors);
  return call.started(gloo_->send(hosts, dst_rank, tag), {});
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::recv(TensorList& tensors, int src_rank, int tag) {
  Collective call(*this, "recv", OpType::RECV);
  auto hosts = call.local(tensors).view(tensors);
  return call.started(gloo_->recv(hosts, src_rank, tag), tensors);
}

c10::intrusive_ptr<Work> ProcessGroupOpenReg::recvAnysource(TensorList& tensors, int tag) {
  Collective call(*this, "recv_anysource", OpType::RECVANYSOURCE);
  auto hosts = call.local(tensors).view(tensors);
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
