#pragma once

#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

// openreg events as PyTorch's event API (c10::Event, torch.Event,
// torch.openreg.Event) sees them: an opaque handle that is null until the
// first record, which creates the runtime event on the recording stream's
// device. Used by the guard implementation (OpenRegGuardImpl.h).
namespace c10::openreg {

// PyTorch's default flag disables timing, as in CUDA.
void record_event(void** event, const c10::Stream& stream, c10::DeviceIndex device_index, c10::EventFlag flag);
// Makes `stream` wait for the event's last record (nothing if never recorded).
void block_on_event(void* event, const c10::Stream& stream);
bool query_event(void* event);
void synchronize_event(void* event);
double event_elapsed_time(void* start, void* end);
void destroy_event(void* event) noexcept;

}  // namespace c10::openreg
