#pragma once

#include <functional>
#include <map>
#include <optional>
#include <vector>

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/ArgumentAgreement.h"
#include "distributed/CollectiveFailure.h"

// Speculative argument agreement: a group's next call predicted from the calls
// its ranks agreed on, so that a repeated collective is issued beside its
// agreement instead of after it.
//
// The agreement (ArgumentAgreement.h) is a round trip that must not simply run
// beside the collective it guards: a collective whose sizes differ across
// ranks aborts the receiving process inside gloo. But every agreed signature
// is known to every rank alike (it came out of the same allgather), and a
// training loop repeats its sequence of collectives (DDP's gradient buckets,
// every step). So each group remembers which agreed signature followed which,
// and every rank derives the same prediction for the next call from that
// verified history. On a prediction each rank issues, then exchanges its
// signature beside the transfer:
// - the call itself, if its signature is the predicted one;
// - otherwise the predicted call on zeroed scratch tensors (same operation,
//   options, dtypes and shapes), so the bytes on the wire are always the ones
//   the other ranks posted; if then every rank turns out to have passed the
//   same other call, they all issue it afterwards.
// If the signatures differ, every rank raises the agreement's ValueError once
// the transfer is done (the tensors of the ranks that issued the call hold
// unspecified values) and the next call agrees before it is issued again.
// Only calls whose signature determines every byte count can be replayed on
// scratch tensors, and only those are predicted.
//
// A self-checking call needs no agreement beside it when every rank passed
// the predicted call: a floating-point SUM all-reduce, whose replay carries a
// NaN in its first element. The sum is NaN wherever a term is, on every rank
// alike (gloo's all-reduce leaves every rank the same bytes), so once the
// transfer is done each rank reads its result's first element: a number means
// every rank issued its own call with these arguments, and the call is done
// with one gloo work, as on CPU tensors; a NaN (a rank replayed, or the data
// holds one there) makes every rank run the agreement after the transfer, as
// above.
namespace c10d::openreg {

class CallPrediction {
 public:
  using Works = std::vector<c10::intrusive_ptr<Work>>;
  // Issues a call to gloo and returns gloo's works.
  using Issue = std::function<Works(Backend& gloo)>;
  // Reads whether the issued call's result carries the replay's mark.
  using Marked = std::function<bool()>;

  // Agrees with the other ranks on `signature` and issues the call (`issue`),
  // on a prediction beside the agreement; `replay` issues the same call on
  // scratch tensors, or is empty if the call cannot be replayed. `marked` is
  // set for a self-checking call (its replay marks the result on every rank)
  // and reads the mark from this call's result. Returns the call's gloo
  // works; raises the agreement's errors. Called for the group's calls one at
  // a time, in call order (the launcher's turn): the prediction for a call
  // needs the previous call's agreement.
  Works agree_and_issue(
      const CallSignature& signature,
      Backend& gloo,
      const PeerProcesses& peers,
      c10::Device device,
      const Issue& issue,
      Issue replay,
      const Marked& marked);

  // An agreed call, as the history keeps it.
  struct Agreed {
    std::vector<int64_t> words;
    Issue replay;
    bool self_checking;
  };

 private:
  // The call predicted to come next, or nullptr.
  const Agreed* predicted() const;
  // Every rank records the same agreed calls, in the same order.
  void agreed(const CallSignature& signature, Issue replay, bool self_checking);
  // After a failed agreement nothing is predicted until a call agrees.
  void disagreed() {
    last_.reset();
  }

  // The signature of the last agreed call, while the history is usable.
  std::optional<std::vector<int64_t>> last_;
  // For each agreed signature, the replayable call that followed it last.
  std::map<std::vector<int64_t>, Agreed> next_;
};

} // namespace c10d::openreg
