#include "Activity.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "Environment.h"
#include "Error.h"
#include "Stream.h"

namespace openreg::runtime {

std::atomic<int> activityConsumers{0};

namespace {

std::mutex& recordsMutex() {
  static std::mutex* const mutex = new std::mutex;  // leaked: stream workers may outlive statics
  return *mutex;
}

std::vector<ActivityEntry>& records() {
  static auto* const all = new std::vector<ActivityEntry>;  // guarded by recordsMutex
  return *all;
}

thread_local std::vector<uint64_t> correlationIds;
thread_local int recordedKernels = 0;  // open on this thread

// A range between its push and its pop. Shared with the stream task that
// timestamps an end the stream reaches later.
struct OpenRange {
  bool recorded;
  std::shared_ptr<Stream> stream;
  ActivityEntry entry;
};
thread_local std::vector<std::shared_ptr<OpenRange>> openRanges;

const char* const kMemcpyNames[4] = {"Memcpy HtoH", "Memcpy HtoD", "Memcpy DtoH", "Memcpy DtoD"};

}  // namespace

int64_t activityTimestamp() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool insideRecordedKernel() {
  return recordedKernels > 0;
}

uint64_t currentCorrelationId() {
  return correlationIds.empty() ? 0 : correlationIds.back();
}

void addActivity(ActivityEntry entry) {
  std::lock_guard lock(recordsMutex());
  records().push_back(std::move(entry));
}

ActivityEntry memcpyActivity(int device, orStream_t stream, orMemcpyKind kind, size_t bytes) {
  return ActivityEntry{orActivityKindMemcpy,
                       kMemcpyNames[kind],
                       device,
                       stream,
                       currentCorrelationId(),
                       activityTimestamp(),
                       0,
                       kind,
                       bytes};
}

}  // namespace openreg::runtime

using namespace openreg::runtime;

// Not kernels themselves: what orKernelBegin hands out while recording.
struct orKernelActivity {
  ActivityEntry entry;
};

orError_t orActivityEnable(void) {
  activityConsumers.fetch_add(1, std::memory_order_relaxed);
  return orSuccess;
}

orError_t orActivityDisable(void) {
  int consumers = activityConsumers.load(std::memory_order_relaxed);
  do {
    if (consumers == 0) {
      return fail(
          orErrorIllegalState,
          "orActivityDisable: activity recording is not enabled (no orActivityEnable "
          "to match)");
    }
  } while (!activityConsumers.compare_exchange_weak(consumers, consumers - 1, std::memory_order_relaxed));
  return orSuccess;
}

orError_t orActivityFlush(void (*fn)(const orActivity*, void*), void* userData) {
  if (fn == nullptr)
    return fail(orErrorInvalidValue, "orActivityFlush: fn is NULL");
  std::vector<ActivityEntry> taken;
  {
    std::lock_guard lock(recordsMutex());
    taken.swap(records());
  }
  for (const ActivityEntry& entry : taken) {
    const orActivity activity{entry.kind,  entry.name.c_str(), entry.device,     entry.stream, entry.correlationId,
                              entry.start, entry.end,          entry.memcpyKind, entry.bytes};
    fn(&activity, userData);
  }
  return orSuccess;
}

orError_t orActivityPushExternalCorrelationId(uint64_t id) {
  correlationIds.push_back(id);
  return orSuccess;
}

orError_t orActivityPopExternalCorrelationId(uint64_t* id) {
  if (correlationIds.empty()) {
    return fail(
        orErrorIllegalState,
        "orActivityPopExternalCorrelationId: this thread has no external correlation id "
        "pushed");
  }
  if (id != nullptr)
    *id = correlationIds.back();
  correlationIds.pop_back();
  return orSuccess;
}

orError_t orKernelBegin(orStream_t stream, const char* name, size_t nameLength, orKernelActivity_t* kernel) {
  if (kernel == nullptr)
    return fail(orErrorInvalidValue, "orKernelBegin: kernel is NULL");
  *kernel = nullptr;
  if (!activityRecording())
    return orSuccess;
  if (name == nullptr && nameLength > 0) {
    return fail(orErrorInvalidValue, "orKernelBegin: name is NULL (nameLength %zu)", nameLength);
  }
  if (runtimeConfig() == nullptr)
    return orErrorInitializationError;
  const std::shared_ptr<Stream> target = findStream(stream, "orKernelBegin");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  *kernel = new orKernelActivity{ActivityEntry{
      orActivityKindKernel, std::string(name == nullptr ? "" : name, nameLength), target->device(), stream,
      currentCorrelationId(), activityTimestamp()}};
  ++recordedKernels;
  return orSuccess;
}

orError_t orKernelEnd(orKernelActivity_t kernel) {
  if (kernel == nullptr)
    return orSuccess;
  const std::unique_ptr<orKernelActivity> owned(kernel);
  --recordedKernels;
  owned->entry.end = activityTimestamp();
  addActivity(std::move(owned->entry));
  return orSuccess;
}

orError_t orRangePush(orStream_t stream, const char* name) {
  if (runtimeConfig() == nullptr)
    return orErrorInitializationError;
  if (name == nullptr)
    return fail(orErrorInvalidValue, "orRangePush: name is NULL");
  const std::shared_ptr<Stream> target = findStream(stream, "orRangePush");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  auto range = std::make_shared<OpenRange>(
      OpenRange{activityRecording(), target, ActivityEntry{orActivityKindRange, name, target->device(), stream, 0, 0}});
  if (range->recorded) {
    if (target->idle()) {
      range->entry.start = activityTimestamp();
    } else if (
        const orError_t error = target->submit("orRangePush", [range] { range->entry.start = activityTimestamp(); });
        error != orSuccess) {
      return error;
    }
  }
  openRanges.push_back(std::move(range));
  return orSuccess;
}

orError_t orRangePop(void) {
  if (openRanges.empty()) {
    return fail(orErrorIllegalState, "orRangePop: no range is open on this thread");
  }
  std::shared_ptr<OpenRange> range = std::move(openRanges.back());
  openRanges.pop_back();
  if (!range->recorded)
    return orSuccess;
  auto close = [range] {
    range->entry.end = activityTimestamp();
    addActivity(std::move(range->entry));
  };
  // A stream destroyed since the push refuses work: nothing is left to reach.
  if (range->stream->idle() || range->stream->submit("orRangePop", close) != orSuccess) {
    close();
  }
  return orSuccess;
}
