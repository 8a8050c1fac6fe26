#include "distributed/CallPrediction.h"

#include <exception>
#include <utility>

namespace c10d::openreg {

namespace {

// Bounds the history of a program whose calls never repeat; forgetting it is
// the same on every rank (they record the same calls).
constexpr size_t kMaxHistory = 4096;

// Waits for works already on the wire before the call reports an error (so
// nothing writes the tensors afterwards); their own errors are superseded.
void drain(const CallPrediction::Works& works) {
  for (const auto& work : works) {
    try {
      work->wait();
    } catch (...) {
    }
  }
}

// The predicted call on scratch tensors. A replay gloo refuses (an agreed
// call it refused before) is refused on every rank that replays it, and
// there are no bytes to match.
CallPrediction::Works replayed(const CallPrediction::Agreed& prediction, Backend& gloo) {
  try {
    return prediction.replay(gloo);
  } catch (...) {
    return {};
  }
}

// Waits for the works of a self-checking call; false if one failed (the
// call's Work reports that failure, naming the peers that are gone).
bool transferred(const CallPrediction::Works& works) {
  bool done = true;
  for (const auto& work : works) {
    try {
      work->wait();
    } catch (...) {
      done = false;
    }
  }
  return done;
}

} // namespace

CallPrediction::Works CallPrediction::agree_and_issue(
    const CallSignature& signature,
    Backend& gloo,
    const PeerProcesses& peers,
    c10::Device device,
    const Issue& issue,
    Issue replay,
    const Marked& marked) {
  const bool self_checking = static_cast<bool>(marked);
  const Agreed* prediction = predicted();
  if (prediction == nullptr) {
    try {
      signature.agree(gloo, peers, device);
    } catch (...) {
      disagreed();
      throw;
    }
    agreed(signature, std::move(replay), self_checking);
    return issue(gloo);
  }
  // Every rank posts the predicted call's bytes: its own call, or the replay.
  const bool as_predicted = signature.words() == prediction->words;
  Works issued;
  std::exception_ptr refusal;
  if (as_predicted) {
    try {
      issued = issue(gloo);
    } catch (...) {
      // gloo checks some arguments the signature does not describe (a
      // tensor's layout): the replay keeps the wire consistent, the refusal
      // fails the agreement on every rank.
      refusal = std::current_exception();
      issued = replayed(*prediction, gloo);
    }
  } else {
    issued = replayed(*prediction, gloo);
  }
  if (prediction->self_checking) {
    // Every rank decides alike from the same result bytes whether to agree.
    if (!transferred(issued)) {
      disagreed();
      if (refusal) {
        std::rethrow_exception(refusal);
      }
      return issued;
    }
    if (as_predicted && !refusal && !marked()) {
      agreed(signature, std::move(replay), self_checking);
      return issued;
    }
  }
  PendingAgreement pending = signature.start_agreement(gloo, refusal != nullptr);
  try {
    signature.finish_agreement(pending, gloo, peers, device);
  } catch (...) {
    disagreed();
    drain(issued);
    if (refusal) {
      std::rethrow_exception(refusal);
    }
    throw;
  }
  agreed(signature, std::move(replay), self_checking);
  if (refusal) {
    // Every rank's gloo refused the same call.
    drain(issued);
    std::rethrow_exception(refusal);
  }
  if (as_predicted) {
    return issued;
  }
  // Every rank passed the same call, other than predicted: the replay is
  // done with, and the call itself follows it on every rank.
  drain(issued);
  return issue(gloo);
}

const CallPrediction::Agreed* CallPrediction::predicted() const {
  if (!last_) {
    return nullptr;
  }
  auto next = next_.find(*last_);
  return next == next_.end() ? nullptr : &next->second;
}

void CallPrediction::agreed(const CallSignature& signature, Issue replay, bool self_checking) {
  if (last_) {
    if (replay) {
      if (next_.size() >= kMaxHistory && next_.find(*last_) == next_.end()) {
        next_.clear();
      }
      next_[*last_] = Agreed{signature.words(), std::move(replay), self_checking};
    } else {
      next_.erase(*last_);
    }
  }
  last_ = signature.words();
}

} // namespace c10d::openreg
