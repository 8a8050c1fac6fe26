// Activity records for profilers (the orActivity* API): what the copy, host
// function and kernel paths call to report their work.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "openreg.h"

namespace openreg::runtime {

// Consumers that enabled recording (orActivityEnable).
extern std::atomic<int> activityConsumers;

// The one check every instrumented path makes: a relaxed load, since a record
// that starts just before or after a consumer enables recording is equally
// valid.
inline bool activityRecording() {
  return activityConsumers.load(std::memory_order_relaxed) > 0;
}

// Nanoseconds since the Unix epoch, the clock profilers put traces on.
int64_t activityTimestamp();

// Whether the calling thread is running a recorded kernel (between
// orKernelBegin and orKernelEnd): its synchronous copies are then part of the
// kernel's record, not records of their own, so no time is counted twice.
bool insideRecordedKernel();

// The calling thread's innermost external correlation id, 0 if none.
uint64_t currentCorrelationId();

struct ActivityEntry {
  orActivityKind kind;
  std::string name;
  int device;
  orStream_t stream;
  uint64_t correlationId;
  int64_t start;
  int64_t end = 0;
  orMemcpyKind memcpyKind = orMemcpyHostToHost;
  size_t bytes = 0;
};

// Stores a completed record until the next orActivityFlush.
void addActivity(ActivityEntry entry);

// The record of a copy, as its name says it.
ActivityEntry memcpyActivity(int device, orStream_t stream, orMemcpyKind kind, size_t bytes);

}  // namespace openreg::runtime
