#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/CollectiveFailure.h"

// The ranks' agreement on a collective's arguments, before gloo runs it.
//
// gloo checks nothing across ranks: sizes that differ kill the receiving
// process from a gloo thread (its transport bounds-checks each message against
// the posted buffer and aborts), and shapes with the same element count, dtypes
// of the same width or different roots silently give wrong results. So every
// rank describes its call in a signature (operation, options, each tensor's
// dtype and, where every rank passes the same shape, its shape and memory
// format) and the ranks
// exchange them in one small gloo allgather; a difference raises ValueError on
// every rank, naming each rank's arguments, and nothing reaches gloo. The
// exchange must finish before the collective starts: issued beside it, a
// collective whose sizes differ would abort a process before the agreement
// could report anything.
namespace c10d::openreg {

class CallSignature {
 public:
  CallSignature(const char* op, OpType type);

  // An option every rank must pass alike: "root" or "reduce_op". Its name
  // travels with it, so that every rank's error names the others' options.
  void option(const char* name, int64_t value);
  // A tensor every rank passes alike: dtype and shape must agree, and the
  // memory format in which gloo reads its bytes (`format`; none for a tensor
  // gloo copies element by element).
  void same_shape(const at::Tensor& tensor, std::optional<at::MemoryFormat> format);
  // A tensor whose shape may differ across ranks (all-to-all parts, which
  // split sizes make uneven): only its dtype must agree.
  void same_dtype(const at::Tensor& tensor);

  // This rank refuses the call's arguments (CollectiveCall::refuse): the
  // agreement then fails on every rank whose call the others do not refuse
  // alike.
  void refuse();

  // Exchanges the signatures over `gloo` (blocking) and raises ValueError on
  // every rank if they differ; a gloo failure is reported for the collective
  // on `device`.
  void agree(Backend& gloo, const PeerProcesses& peers, c10::Device device) const;

 private:
  // A rank's exchanged record as text: "ALLREDUCE(reduce_op=0; Float[4])".
  std::string describe(const int64_t* record) const;

  const char* op_;
  std::vector<int64_t> words_;
  bool refused_ = false;
};

}  // namespace c10d::openreg
