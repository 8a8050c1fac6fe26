#include "Event.h"

#include <utility>

#include "Environment.h"
#include "Error.h"
#include "HandleRegistry.h"

namespace openreg::runtime {

namespace {

HandleRegistry<Event>& events() {
  static HandleRegistry<Event>* const registry = new HandleRegistry<Event>;  // leaked
  return *registry;
}

// The live event behind handle, or null after recording a message that names
// context, the handle and its role.
std::shared_ptr<Event> findEvent(orEvent_t handle, const char* context, const char* role) {
  if (std::shared_ptr<Event> event = events().find(reinterpret_cast<uintptr_t>(handle))) {
    return event;
  }
  fail(
      orErrorInvalidResourceHandle, "%s: %s %p is not a live event (destroyed, or never created)", context, role,
      static_cast<void*>(handle));
  return nullptr;
}

}  // namespace

void Record::complete() {
  const Clock::time_point now = timed_ ? Clock::now() : Clock::time_point();
  std::lock_guard lock(mutex_);
  time_ = now;
  completed_ = true;
  completion_.notify_all();
}

bool Record::completed() {
  std::lock_guard lock(mutex_);
  return completed_;
}

void Record::wait(Checks checks) {
  if (checks.on()) {
    if (const std::shared_ptr<Stream> stream = liveStream(stream_, device_))
      stream->require(task_);
  }
  std::unique_lock lock(mutex_);
  completion_.wait(lock, [this] { return completed_; });
}

orError_t Record::takeHostWrites(const char* observer) {
  const std::shared_ptr<Stream> stream = liveStream(stream_, device_);
  // A destroyed stream's writes were reported by orStreamDestroy.
  return stream != nullptr ? stream->takeHostWrites(task_, observer) : orSuccess;
}

Clock::time_point Record::time() {
  std::lock_guard lock(mutex_);
  return time_;
}

orError_t Event::record(Stream& stream) {
  auto record = std::make_shared<Record>(timed(), stream);
  // Held across the submission so that concurrent records of this event end
  // up in latest_ in the order they were queued.
  std::lock_guard lock(mutex_);
  uint64_t task;
  if (const orError_t error = stream.submit(
          "orEventRecord", [record] { record->complete(); }, /*marker=*/true, &task);
      error != orSuccess) {
    return error;
  }
  record->setTask(task);
  latest_ = std::move(record);
  return orSuccess;
}

std::shared_ptr<Record> Event::latest() {
  std::lock_guard lock(mutex_);
  return latest_;
}

}  // namespace openreg::runtime

using namespace openreg::runtime;

orError_t orEventCreate(orEvent_t* event) {
  return orEventCreateWithFlags(event, orEventDefault);
}

orError_t orEventCreateWithFlags(orEvent_t* event, unsigned int flags) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (event == nullptr)
    return fail(orErrorInvalidValue, "orEventCreateWithFlags: event is NULL");
  if ((flags & ~static_cast<unsigned int>(orEventDisableTiming)) != 0) {
    return fail(
        orErrorInvalidValue,
        "orEventCreateWithFlags: flags 0x%x are invalid (expected orEventDefault or "
        "orEventDisableTiming)",
        flags);
  }
  *event = events().create(flags)->handle();
  return orSuccess;
}

orError_t orEventRecord(orEvent_t event, orStream_t stream) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  const std::shared_ptr<Event> target = findEvent(event, "orEventRecord", "event");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  const std::shared_ptr<Stream> queue = findStream(stream, "orEventRecord");
  if (queue == nullptr)
    return orErrorInvalidResourceHandle;
  return target->record(*queue);
}

orError_t orEventQuery(orEvent_t event) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  const std::shared_ptr<Event> target = findEvent(event, "orEventQuery", "event");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  const std::shared_ptr<Record> record = target->latest();
  if (record == nullptr)
    return orSuccess;
  const Checks checks = completionChecks();
  // As orStreamQuery: held-back work has not completed, and a query does not start it.
  if (!record->completed()) {
    return fail(
        orErrorNotReady, "orEventQuery: the last record of event %p has not completed", static_cast<void*>(event));
  }
  return checks.unreported() ? record->takeHostWrites("orEventQuery") : orSuccess;
}

orError_t orEventSynchronize(orEvent_t event) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  const std::shared_ptr<Event> target = findEvent(event, "orEventSynchronize", "event");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  const std::shared_ptr<Record> record = target->latest();
  if (record == nullptr)
    return orSuccess;
  const Checks checks = completionChecks();
  record->wait(checks);
  return checks.any() ? record->takeHostWrites("orEventSynchronize") : orSuccess;
}

orError_t orEventElapsedTime(float* ms, orEvent_t start, orEvent_t end) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (ms == nullptr)
    return fail(orErrorInvalidValue, "orEventElapsedTime: ms is NULL");
  const orEvent_t handles[2] = {start, end};
  const char* const roles[2] = {"start event", "end event"};
  std::shared_ptr<Record> records[2];
  for (int i = 0; i < 2; ++i) {
    const std::shared_ptr<Event> event = findEvent(handles[i], "orEventElapsedTime", roles[i]);
    if (event == nullptr)
      return orErrorInvalidResourceHandle;
    if (!event->timed()) {
      return fail(
          orErrorInvalidResourceHandle, "orEventElapsedTime: the %s %p was created with orEventDisableTiming", roles[i],
          static_cast<void*>(handles[i]));
    }
    records[i] = event->latest();
    if (records[i] == nullptr) {
      return fail(
          orErrorInvalidResourceHandle, "orEventElapsedTime: the %s %p has never been recorded", roles[i],
          static_cast<void*>(handles[i]));
    }
  }
  // As cudaEventElapsedTime: the two timestamps come from different devices'
  // clocks, so their difference would mean nothing on real hardware.
  if (records[0]->device() != records[1]->device()) {
    return fail(
        orErrorInvalidResourceHandle,
        "orEventElapsedTime: the start event %p was recorded on device %d and the end "
        "event %p on device %d; elapsed time is defined only between events of one device",
        static_cast<void*>(start), records[0]->device(), static_cast<void*>(end), records[1]->device());
  }
  for (int i = 0; i < 2; ++i) {
    if (!records[i]->completed()) {
      return fail(
          orErrorNotReady, "orEventElapsedTime: the last record of the %s %p has not completed", roles[i],
          static_cast<void*>(handles[i]));
    }
  }
  *ms = std::chrono::duration<float, std::milli>(records[1]->time() - records[0]->time()).count();
  return orSuccess;
}

orError_t orEventDestroy(orEvent_t event) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  // A queued record keeps its own Record alive, so this frees nothing it uses.
  if (!events().remove(reinterpret_cast<uintptr_t>(event))) {
    return fail(
        orErrorInvalidResourceHandle, "orEventDestroy: event %p is not a live event (destroyed, or never created)",
        static_cast<void*>(event));
  }
  return orSuccess;
}

orError_t orStreamWaitEvent(orStream_t stream, orEvent_t event, unsigned int flags) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (flags != 0) {
    return fail(orErrorInvalidValue, "orStreamWaitEvent: flags 0x%x are invalid (expected 0)", flags);
  }
  const std::shared_ptr<Stream> queue = findStream(stream, "orStreamWaitEvent");
  if (queue == nullptr)
    return orErrorInvalidResourceHandle;
  const std::shared_ptr<Event> target = findEvent(event, "orStreamWaitEvent", "event");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  const std::shared_ptr<Record> record = target->latest();
  // Never recorded, or already complete: nothing to wait for.
  if (record == nullptr || record->completed())
    return orSuccess;
  return queue->submit("orStreamWaitEvent", [record] { record->wait(completionChecks()); });
}
