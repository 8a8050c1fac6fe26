#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

// How a failed collective is reported: gloo's error, plus the collective, the
// rank, the device and the peers that are gone.
namespace c10d::openreg {

// Which process each rank of a group runs in, so that a failed collective can
// say which peers are gone: at creation each rank publishes its host name and
// process id in the group's store and reads the others' (the store may be gone
// by the time a collective fails: its host may be the rank that died). After a
// failure, a peer on this host whose process no longer exists is named; gloo's
// own message names the peer's address.
class PeerProcesses {
 public:
  PeerProcesses(const c10::intrusive_ptr<Store>& store, int rank, int size);

  // What a failed collective adds to gloo's message: "orccl allreduce on rank
  // 0 (openreg:0) failed; rank 1 (process 4242 on this host) is no longer
  // running".
  std::string failure(const char* op, int rank, c10::Device device) const;

 private:
  // Process ids of the peers on this host (0 elsewhere and for this rank).
  std::vector<pid_t> local_pids_;
};

// Rethrows the exception being handled with `context` added: a c10::Error
// keeps its type; gloo's transport errors (std::exception) become
// DistBackendError, as torch.distributed reports backend failures.
[[noreturn]] void rethrow_with(const std::string& context);

}  // namespace c10d::openreg
