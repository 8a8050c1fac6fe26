#pragma once

#include <atomic>
#include <cstdint>

#include <c10/core/Stream.h>
#include <c10/core/impl/GPUTrace.h>

namespace c10::openreg::sanitizer {

// The stream-order sanitizer's view of openreg (docs/sanitizer.md). While it is on, openreg reports each stream,
// event and memory operation through PyTorch's GPU trace (c10::impl::GPUTrace), as CUDA's runtime wrappers do for
// CUDA's sanitizer: PyTorch delivers a PrivateUse1 trace to the callbacks of torch.openreg._gpu_trace (its Python
// interpreter imports `torch.<backend name>._gpu_trace`). Off by default; off, a trace point costs one relaxed load.
//
// A trace point takes the GIL to run the callbacks, so it is never called with a lock held that a Python thread may
// wait for.
inline std::atomic<bool> g_enabled{false};

inline bool enabled() noexcept {
  return g_enabled.load(std::memory_order_relaxed);
}

// Turns the trace on or off, and with it the runtime's completion checks (orSetCompletionChecks): asynchronous work
// that completes only when the host synchronizes with it.
void set_enabled(bool on);

// The id the sanitizer knows a stream by: unique per device and stream (each device's default stream included).
uintptr_t stream_id(const c10::Stream& stream);

// The caching allocator returned a segment to the runtime: orFree first waits for the work of every stream of the
// device, as cudaFree does, so that is a device synchronization, after which every freed block is ordered after every
// stream's use of it. It happens under the cache's lock, where a trace cannot run (see above): release_segment notes it,
// and the allocator's entry point reports it with trace_noted_synchronization() on the same thread once the lock is
// released, before it reports the allocation it made, if any.
void note_runtime_free() noexcept;
void trace_noted_synchronization() noexcept;

// What a query answers while the completion checks hold work back: "not ready" the first time it is asked about a
// stream or event (`key`) with pending work, as a busy GPU would answer right after the work was queued; asked again,
// it completes the work (the caller synchronizes) and answers "ready", so a polling loop still ends. `pending`: whether
// the runtime reported pending work. True: answer "not ready".
bool answer_not_ready(uintptr_t key, bool pending);

// Sets the calling thread's Python exception aside while a trace runs its callbacks, holding the GIL: a block freed
// while a Python exception unwinds the stack would otherwise call Python with that exception set.
class PythonExceptionSetAside {
 public:
  PythonExceptionSetAside();
  ~PythonExceptionSetAside();
  PythonExceptionSetAside(const PythonExceptionSetAside&) = delete;
  PythonExceptionSetAside& operator=(const PythonExceptionSetAside&) = delete;

 private:
  bool active_ = false;
  int gil_state_ = 0;  // PyGILState_STATE
  void* exception_[3] = {};  // type, value, traceback
};

template <typename Report>
inline void trace(Report&& report) {
  if (C10_UNLIKELY(enabled())) {
    if (const c10::impl::PyInterpreter* interpreter = c10::impl::GPUTrace::get_trace()) {
      const PythonExceptionSetAside set_aside;
      report(**interpreter);
    }
  }
}

}  // namespace c10::openreg::sanitizer
