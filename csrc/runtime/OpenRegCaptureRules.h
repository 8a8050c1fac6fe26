#pragma once

#include <atomic>
#include <thread>

#include <c10/core/Stream.h>
#include <c10/macros/Macros.h>

// What CUDA's stream capture forbids, for openreg's graphs (csrc/graph/):
// while a capture is active, a call that makes the host wait for the device
// (item(), a synchronous copy, torch.openreg.synchronize(), nonzero, ...) or
// allocates pinned host memory raises CUDA's
// cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is
// capturing", and invalidates the capture, whose end then raises
// cudaErrorStreamCaptureInvalidated; a copy between the device and unpinned
// host memory on the capturing stream is refused as ATen's CUDA copy refuses
// it. Which captures forbid a call is the capture's error mode, as in
// cudaStreamCaptureMode: global (every thread's calls), thread_local (those of
// the thread that began it) and relaxed (only calls that conflict with the
// capture itself: synchronizing the capturing stream).
namespace c10::openreg {

enum class CaptureErrorMode { Global, ThreadLocal, Relaxed };

// One active capture, registered for as long as it lives (StreamCapture).
class CaptureRegistration {
 public:
  CaptureRegistration(c10::Stream stream, CaptureErrorMode mode);
  ~CaptureRegistration();
  CaptureRegistration(const CaptureRegistration&) = delete;
  CaptureRegistration& operator=(const CaptureRegistration&) = delete;

  c10::Stream stream() const {
    return stream_;
  }
  // Raises cudaErrorStreamCaptureInvalidated's error if a forbidden call
  // invalidated the capture, as its end does on CUDA.
  void check_valid() const;
  // Whether the capture forbids the calling thread a synchronizing call now.
  bool forbids_synchronizing_call() const;
  void invalidate() {
    invalidated_.store(true, std::memory_order_relaxed);
  }

 private:
  const c10::Stream stream_;
  const CaptureErrorMode mode_;
  const std::thread::id owner_;
  std::atomic<bool> invalidated_{false};
};

// Whether a capture on `stream` is active.
bool stream_is_capturing(c10::Stream stream);

namespace detail {
extern std::atomic<int> g_active_captures;
void refuse_if_capture_forbids(const char* what);
}  // namespace detail

// One relaxed load: the checks below cost nothing more while nothing captures.
inline bool any_capture_active() {
  return C10_UNLIKELY(detail::g_active_captures.load(std::memory_order_relaxed) != 0);
}

// A call that makes the host wait for the device, or allocates pinned host
// memory: raises (and invalidates the capture) if an active capture forbids
// it.
inline void check_capture_allows(const char* what) {
  if (any_capture_active()) {
    detail::refuse_if_capture_forbids(what);
  }
}

// A copy between host memory and `device`, on its current stream: refused
// while that stream captures if the host memory is not pinned (`pinned`
// costs a runtime query, so callers ask only when any_capture_active()).
void check_capture_allows_host_copy(c10::DeviceIndex device, bool pinned, bool non_blocking);

}  // namespace c10::openreg
