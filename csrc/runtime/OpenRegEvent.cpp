#include "runtime/OpenRegEvent.h"

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegGuard.h"
#include "runtime/OpenRegStream.h"
#include "sanitizer/SanitizerTrace.h"

namespace c10::openreg {

void record_event(void** event, const c10::Stream& stream, c10::DeviceIndex device_index, c10::EventFlag flag) {
  TORCH_CHECK(
      device_index == -1 || device_index == stream.device_index(), "Event device index ",
      static_cast<int>(device_index), " does not match recording stream's device index ",
      static_cast<int>(stream.device_index()), ".");
  const OpenRegStream openreg_stream(stream);
  OpenRegGuard guard(stream.device());
  auto or_event = static_cast<orEvent_t>(*event);
  if (or_event == nullptr) {
    const unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT ? orEventDefault : orEventDisableTiming;
    OPENREG_CHECK(orEventCreateWithFlags(&or_event, flags));
    *event = or_event;
    sanitizer::trace([&](const auto& t) { t.trace_gpu_event_creation(c10::kPrivateUse1, uintptr_t(or_event)); });
  }
  OPENREG_CHECK(orEventRecord(or_event, openreg_stream.handle()));
  sanitizer::trace([&](const auto& t) {
    t.trace_gpu_event_record(c10::kPrivateUse1, uintptr_t(or_event), sanitizer::stream_id(stream));
  });
}

void block_on_event(void* event, const c10::Stream& stream) {
  if (event == nullptr) {
    return;  // never recorded: nothing to wait for
  }
  const OpenRegStream openreg_stream(stream);
  OpenRegGuard guard(stream.device());
  OPENREG_CHECK(orStreamWaitEvent(openreg_stream.handle(), static_cast<orEvent_t>(event), 0));
  sanitizer::trace([&](const auto& t) {
    t.trace_gpu_event_wait(c10::kPrivateUse1, uintptr_t(event), sanitizer::stream_id(stream));
  });
}

bool query_event(void* event) {
  if (event == nullptr) {
    return true;
  }
  const orError_t err = orEventQuery(static_cast<orEvent_t>(event));
  if (err != orErrorNotReady) {
    OPENREG_CHECK(err);
  }
  if (sanitizer::enabled()) {
    if (sanitizer::answer_not_ready(uintptr_t(event), err == orErrorNotReady)) {
      return false;
    }
    synchronize_event(event);  // completes the held-back work, and reports it to the checker
    return true;
  }
  return err == orSuccess;
}

void synchronize_event(void* event) {
  if (event != nullptr) {
    OPENREG_CHECK(orEventSynchronize(static_cast<orEvent_t>(event)));
    sanitizer::trace([&](const auto& t) { t.trace_gpu_event_synchronization(c10::kPrivateUse1, uintptr_t(event)); });
  }
}

double event_elapsed_time(void* start, void* end) {
  TORCH_CHECK(start != nullptr && end != nullptr, "Both events must be recorded before calculating elapsed time.");
  float ms = 0;
  const orError_t err = orEventElapsedTime(&ms, static_cast<orEvent_t>(start), static_cast<orEvent_t>(end));
  TORCH_CHECK(err != orErrorNotReady, "Both events must be completed before calculating elapsed time.");
  // c10::Event has checked timing flags and recording; what the runtime
  // still refuses (events of two devices, whose clocks are unrelated, as
  // CUDA refuses them) its message names.
  TORCH_CHECK(err == orSuccess, "openreg Event.elapsed_time: ", orGetLastErrorMessage());
  return ms;
}

void destroy_event(void* event) noexcept {
  if (event != nullptr) {
    sanitizer::trace([&](const auto& t) { t.trace_gpu_event_deletion(c10::kPrivateUse1, uintptr_t(event)); });
    (void)orEventDestroy(static_cast<orEvent_t>(event));
  }
}

}  // namespace c10::openreg
