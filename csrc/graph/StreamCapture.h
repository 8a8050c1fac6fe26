#pragma once

#include <mutex>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Stream.h>

#include "runtime/OpenRegCaptureRules.h"

// Stream capture: which streams are capturing, and the operator calls issued
// to each. As with CUDA, what a capture sees is the work issued to its stream
// from any thread: here, every outermost operator call that touches openreg
// memory while the calling thread's current stream (on that device) is the
// capture stream, observed through a RecordFunction callback installed while
// any capture is active. The graph (OpenRegGraph.cpp) turns a finished capture
// into something to replay.
namespace c10::openreg {

struct CapturedCall {
  c10::OperatorHandle op;
  std::vector<c10::IValue> inputs;
  std::vector<c10::IValue> outputs;
};

// Captures the calls issued to `stream` for as long as it lives.
class StreamCapture {
 public:
  StreamCapture(c10::Stream stream, CaptureErrorMode mode);
  ~StreamCapture();
  StreamCapture(const StreamCapture&) = delete;
  StreamCapture& operator=(const StreamCapture&) = delete;

  c10::Stream stream() const {
    return stream_;
  }
  // The calls captured so far, in issue order; the capture goes on empty.
  std::vector<CapturedCall> take_calls();
  // Raises if a call the capture forbids was made (OpenRegCaptureRules.h).
  void check_valid() const {
    registration_.check_valid();
  }

 private:
  friend class CaptureObserver;  // appends the calls it observes

  const c10::Stream stream_;
  const CaptureRegistration registration_;
  std::mutex calls_mutex_;
  std::vector<CapturedCall> calls_;
};

}  // namespace c10::openreg
