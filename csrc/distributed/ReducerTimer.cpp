// DDP's per-iteration timings for openreg modules.
//
// DDP's reducer asks c10d's TimerRegistry for a timer of the module's device type
// (torch/csrc/distributed/c10d/reducer_timer.hpp). Without one it warns "Time stats are currently only collected
// for CPU and CUDA devices" and its logging data (DistributedDataParallel._get_ddp_logging_data()) has no forward,
// backward or communication times. As CUDA's timer does, this one records an event on the current stream for each
// point of the iteration, so the times are those of the device's work, not of the host enqueueing it.

#include <array>
#include <optional>

#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include "runtime/OpenRegGuard.h"
#include "runtime/OpenRegStream.h"

namespace c10d::openreg {

namespace {

constexpr int64_t kNanosecondsPerMillisecond = 1000000;

class OpenRegReducerTimer final : public Timer {
 public:
  explicit OpenRegReducerTimer(c10::Device device) : device_(device) {}

  void record(Event event) override {
    Timer::record(event);  // the host time too: DDP reports the gaps between host timestamps as well
    c10::openreg::OpenRegGuard guard(device_.index());
    event_for(event).record(c10::openreg::getCurrentOpenRegStream(device_.index()));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    c10::Event& start_event = event_for(start);
    c10::Event& end_event = event_for(end);
    // An iteration under no_sync() records no communication events, and one without backward() none of
    // backward's: nothing to measure then.
    if (!start_event.was_marked_for_recording() || !end_event.was_marked_for_recording()) {
      return std::nullopt;
    }
    // DDP asks at the start of a forward, when the previous iteration's work has (nearly) finished.
    start_event.synchronize();
    end_event.synchronize();
    const double milliseconds = start_event.elapsedTime(end_event);
    // The end recorded in an earlier iteration than the start (no_sync() again): no valid time.
    if (milliseconds < 0) {
      return std::nullopt;
    }
    return static_cast<int64_t>(milliseconds * kNanosecondsPerMillisecond);
  }

 private:
  c10::Event& event_for(Event event) {
    return events_.at(static_cast<size_t>(event));
  }

  // BACKEND_DEFAULT: events with timing, as torch.Event(enable_timing=True) creates them.
  static c10::Event timing_event() {
    return c10::Event(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT);
  }

  c10::Device device_;
  std::array<c10::Event, 5> events_{timing_event(), timing_event(), timing_event(), timing_event(), timing_event()};
};

}  // namespace

C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, OpenRegReducerTimer);

}  // namespace c10d::openreg
