// The profiler stubs of the legacy autograd profiler for openreg, the
// PrivateUse1 counterpart of torch's CUDA stubs.
//
// torch.autograd.profiler.profile(use_device="openreg") runs in the
// KINETO_PRIVATEUSE1_FALLBACK state: around every operator, the profiler calls
// record() once when the operator starts and once when it ends, and after the
// region elapsed() on the pair gives the operator's device time. Without
// stubs registered, every record() fails ("PrivateUse1 used in profiler but
// not enabled") and the profiler asserts on the half-built event.
//
// The events are timed runtime events recorded on the current openreg stream,
// so an operator's device time is the time the stream took from the first
// mark to the second. The second mark is queued after the operator's
// host-executed kernels have run (they wait for the stream first) and after
// any work it queued (asynchronous copies, host functions), so the interval
// covers both. docs/profiling.md says what that means for the numbers.
#include <torch/csrc/profiler/stubs/base.h>

#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

namespace c10::openreg {
namespace {

using torch::profiler::impl::ProfilerStubs;
using torch::profiler::impl::ProfilerVoidEventStub;

orEvent_t as_event(const ProfilerVoidEventStub* stub) {
  return static_cast<orEvent_t>(stub->get());
}

struct OpenRegProfilerStubs final : public ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = current_device();
    if (device != nullptr) {
      *device = index;
    }
    orEvent_t raw = nullptr;
    OPENREG_CHECK(orEventCreate(&raw));
    // Owned by the profiler's record; destroyed with it. A failed destroy
    // cannot be reported from a deleter, and leaves only a runtime handle.
    *event = ProfilerVoidEventStub(raw, [](void* e) { (void)orEventDestroy(static_cast<orEvent_t>(e)); });
    const OpenRegStream stream = getCurrentOpenRegStream(index);
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
    OPENREG_CHECK(orEventRecord(raw, stream.handle()));
  }

  // Microseconds, as the profiler expects (the runtime gives milliseconds).
  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    OPENREG_CHECK(orEventSynchronize(as_event(start)));
    OPENREG_CHECK(orEventSynchronize(as_event(end)));
    float ms = 0;
    OPENREG_CHECK(orEventElapsedTime(&ms, as_event(start), as_event(end)));
    return ms * 1000.0f;
  }

  // Markers and ranges are the runtime's stream ranges (what
  // torch.openreg.profiler.range makes), on the current stream. The profiler
  // cannot take an error here; a pop without a push has nothing to close.
  void mark(const char* name) const override {
    rangePush(name);
    rangePop();
  }
  void rangePush(const char* name) const override {
    (void)orRangePush(getCurrentOpenRegStream(current_device()).handle(), name);
  }
  void rangePop() const override {
    (void)orRangePop();
  }

  bool enabled() const override {
    return true;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex count = device_count();
    for (c10::DeviceIndex index = 0; index < count; ++index) {
      const c10::DeviceGuard guard(make_device(index));
      op(index);
    }
  }

  void synchronize() const override {
    synchronize_device(current_device());
  }
};

// Registered when the extension loads, before any profiler can start.
[[maybe_unused]] const bool registered = [] {
  static OpenRegProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

}  // namespace
}  // namespace c10::openreg
