#include "Stream.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "Activity.h"
#include "CompletionChecks.h"
#include "Device.h"
#include "Error.h"
#include "HandleRegistry.h"

namespace openreg::runtime {

namespace {

// Three levels, as on some CUDA devices; lower numbers are higher priority.
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -2;

struct DeviceStreams {
  std::once_flag defaultCreated;
  std::shared_ptr<Stream> defaultStream;
};

// Per device: tasks submitted to its streams and not yet completed, so that
// synchronizeDevice (hence orFree) and orStreamSynchronize of an idle default
// stream take no lock. Constant-initialized and trivially destroyed, so that
// stream workers may use it at any time and the check needs no guard.
std::atomic<uint64_t> pendingTasks[kMaxDevices]{};

DeviceStreams& deviceStreams(int index) {
  static DeviceStreams* const all = new DeviceStreams[kMaxDevices];  // leaked, like the devices
  return all[index];
}

HandleRegistry<Stream>& streams() {
  static HandleRegistry<Stream>* const registry = new HandleRegistry<Stream>;  // leaked
  return *registry;
}

std::shared_ptr<Stream> defaultStream(int index) {
  DeviceStreams& entry = deviceStreams(index);
  std::call_once(
      entry.defaultCreated, [&] { entry.defaultStream = std::make_shared<Stream>(0, index, kLeastPriority); });
  return entry.defaultStream;
}

// synchronizeDevice past its check. Out of line, so that the check (every
// orFree makes it) saves no registers.
[[gnu::noinline]] orError_t synchronizeStreams(int index, const char* observer) {
  std::vector<std::shared_ptr<Stream>> pending{defaultStream(index)};
  streams().forEach([&](const std::shared_ptr<Stream>& stream) {
    if (stream->device() == index)
      pending.push_back(stream);
  });
  orError_t result = orSuccess;
  for (const std::shared_ptr<Stream>& stream : pending) {
    // One report per call: a second would overwrite the first's message.
    const orError_t error = stream->synchronize(result == orSuccess ? observer : nullptr);
    if (result == orSuccess)
      result = error;
  }
  return result;
}

}  // namespace

Stream::Stream(uintptr_t handle, int device, int priority) : handle_(handle), device_(device), priority_(priority) {}

orError_t Stream::submit(const char* context, std::function<void()> task, bool marker, uint64_t* number) {
  std::unique_lock lock(mutex_);
  if (stopping_) {
    return fail(
        orErrorInvalidResourceHandle, "%s: stream %p is being destroyed", context, static_cast<void*>(handle()));
  }
  if (!worker_.joinable()) {
    try {
      worker_ = std::thread(&Stream::run, this);
    } catch (const std::system_error& error) {
      return fail(
          orErrorMemoryAllocation, "%s: cannot start the worker thread of stream %p of device %d: %s", context,
          static_cast<void*>(handle()), device_, error.what());
    }
  }
  tasks_.push_back({std::move(task), marker});
  ++submitted_;
  if (number != nullptr)
    *number = submitted_;
  pendingTasks[device_].fetch_add(1, std::memory_order_relaxed);
  lock.unlock();
  workQueued_.notify_one();
  return orSuccess;
}

bool Stream::idle() {
  std::lock_guard lock(mutex_);
  return completed_ == submitted_;
}

orError_t Stream::synchronize(const char* observer) {
  std::unique_lock lock(mutex_);
  const uint64_t target = submitted_;
  if (completionChecks().on())
    demand(target);
  workCompleted_.wait(lock, [&] { return completed_ >= target; });
  return observer != nullptr && !hostWrites_.empty() ? reportHostWrites(target, observer) : orSuccess;
}

void Stream::require(uint64_t task) {
  std::lock_guard lock(mutex_);
  demand(task);
}

void Stream::requireAll() {
  std::lock_guard lock(mutex_);
  // Raising the bound wakes the worker if it holds back any task; if it is
  // already at submitted_, it holds back none.
  demand(submitted_);
}

bool Stream::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_)
      return false;
    stopping_ = true;
  }
  workQueued_.notify_one();
  // No submit touches worker_ once stopping_ is set.
  if (worker_.joinable())
    worker_.join();
  return true;
}

void Stream::run() {
  // Host functions see the stream's device as current; it was valid when the
  // stream was created, so this cannot fail.
  orSetDevice(device_);
  std::unique_lock lock(mutex_);
  for (;;) {
    // The mode is read under the lock, and every change of it is followed by
    // requireAll, so a worker holding back tasks never misses the change.
    workQueued_.wait(lock, [this] {
      return stopping_ || (!tasks_.empty() && (!completionChecks().on() || completed_ < required_));
    });
    if (tasks_.empty())
      return;
    const Task task = std::move(tasks_.front());
    tasks_.pop_front();
    if (!task.marker) {
      lock.unlock();
      task.body();
      lock.lock();
    } else {
      task.body();
    }
    complete();
  }
}

void Stream::complete() {
  ++completed_;
  // Release: whoever sees the count drop also sees the task's writes.
  pendingTasks[device_].fetch_sub(1, std::memory_order_release);
  workCompleted_.notify_all();
}

void Stream::demand(uint64_t task) {
  if (task <= required_)
    return;
  required_ = task;
  workQueued_.notify_one();
}

void Stream::addHostWrite(HostWrite write) {
  std::lock_guard lock(mutex_);
  // Called by the running task, the one after the last completed.
  write.task = completed_ + 1;
  hostWrites_.push_back(write);
  checkWord.fetch_add(kUnreportedWrite, std::memory_order_relaxed);
}

orError_t Stream::takeHostWrites(uint64_t task, const char* observer) {
  std::lock_guard lock(mutex_);
  return reportHostWrites(task, observer);
}

orError_t Stream::reportHostWrites(uint64_t task, const char* observer) {
  const auto end = std::find_if(
      hostWrites_.begin(), hostWrites_.end(), [task](const HostWrite& write) { return write.task > task; });
  const size_t found = end - hostWrites_.begin();
  if (found == 0)
    return orSuccess;
  const HostWrite first = hostWrites_.front();
  hostWrites_.erase(hostWrites_.begin(), end);
  checkWord.fetch_sub(found * kUnreportedWrite, std::memory_order_relaxed);
  const std::string more = found > 1 ? " (and " + std::to_string(found - 1) + " more copies on this stream)" : "";
  return fail(
      orErrorHostWriteDuringCopy,
      "%s: the host wrote into [%p, %p), the source of an %s of %zu bytes on stream %p of device %d, after the call "
      "and before the copy ran (first changed byte at offset %zu); the copy took the changed data%s",
      observer, first.source, static_cast<const char*>(first.source) + first.count, first.context, first.count,
      static_cast<void*>(handle()), device_, first.offset, more.c_str());
}

std::shared_ptr<Stream> findStream(orStream_t handle, const char* context) {
  if (handle == nullptr)
    return defaultStream(currentDevice());
  if (std::shared_ptr<Stream> stream = streams().find(reinterpret_cast<uintptr_t>(handle))) {
    return stream;
  }
  fail(
      orErrorInvalidResourceHandle, "%s: stream %p is not a live stream (destroyed, or never created)", context,
      static_cast<void*>(handle));
  return nullptr;
}

std::shared_ptr<Stream> liveStream(orStream_t handle, int device) {
  if (handle == nullptr)
    return defaultStream(device);
  return streams().find(reinterpret_cast<uintptr_t>(handle));
}

orError_t synchronizeDevice(int index, const char* observer) {
  if (pendingTasks[index].load(std::memory_order_acquire) == 0 &&
      (observer == nullptr || !completionChecks().unreported())) {
    return orSuccess;
  }
  return synchronizeStreams(index, observer);
}

void requireAllStreams(int deviceCount) {
  std::vector<std::shared_ptr<Stream>> all;
  for (int index = 0; index < deviceCount; ++index)
    all.push_back(defaultStream(index));
  streams().forEach([&](const std::shared_ptr<Stream>& stream) { all.push_back(stream); });
  for (const std::shared_ptr<Stream>& stream : all)
    stream->requireAll();
}

}  // namespace openreg::runtime

using namespace openreg::runtime;

namespace {

orError_t createStream(const char* context, orStream_t* stream, unsigned int flags, int priority) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (stream == nullptr)
    return fail(orErrorInvalidValue, "%s: stream is NULL", context);
  // 1 is CUDA's non-blocking flag: no stream waits implicitly for the default
  // one here, so it changes nothing.
  if (flags > 1) {
    return fail(orErrorInvalidValue, "%s: flags 0x%x are invalid (expected 0, or 1 for non-blocking)", context, flags);
  }
  // Out-of-range priorities are clamped, as CUDA does.
  priority = std::clamp(priority, kGreatestPriority, kLeastPriority);
  *stream = streams().create(currentDevice(), priority)->handle();
  return orSuccess;
}

}  // namespace

orError_t orStreamCreate(orStream_t* stream) {
  return createStream("orStreamCreate", stream, 0, kLeastPriority);
}

orError_t orStreamCreateWithPriority(orStream_t* stream, unsigned int flags, int priority) {
  return createStream("orStreamCreateWithPriority", stream, flags, priority);
}

orError_t orStreamDestroy(orStream_t stream) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (stream == nullptr) {
    return fail(orErrorInvalidResourceHandle, "orStreamDestroy: the default stream (NULL) cannot be destroyed");
  }
  const std::shared_ptr<Stream> target = findStream(stream, "orStreamDestroy");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  // Stays registered while it drains, so synchronizeDevice still waits for it.
  if (!target->stop()) {
    return fail(
        orErrorInvalidResourceHandle, "orStreamDestroy: stream %p is already being destroyed",
        static_cast<void*>(stream));
  }
  streams().remove(reinterpret_cast<uintptr_t>(stream));
  return completionChecks().unreported() ? target->takeHostWrites(UINT64_MAX, "orStreamDestroy") : orSuccess;
}

orError_t orStreamQuery(orStream_t stream) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  const std::shared_ptr<Stream> target = findStream(stream, "orStreamQuery");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  const Checks checks = completionChecks();
  // Held-back work is work in progress: a query does not start it.
  if (!target->idle()) {
    return fail(
        orErrorNotReady, "orStreamQuery: stream %p of device %d has work in progress", static_cast<void*>(stream),
        target->device());
  }
  return checks.unreported() ? target->takeHostWrites(UINT64_MAX, "orStreamQuery") : orSuccess;
}

orError_t orStreamSynchronize(orStream_t stream) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  // Hosts synchronize with the default stream before every host-side read;
  // when nothing is pending on the device at all (nor awaits a report), that
  // needs no lock.
  // Acquire: pairs with the release in Stream::complete.
  if (stream == nullptr && pendingTasks[currentDevice()].load(std::memory_order_acquire) == 0 &&
      !completionChecks().unreported()) {
    return orSuccess;
  }
  const std::shared_ptr<Stream> target = findStream(stream, "orStreamSynchronize");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  return target->synchronize("orStreamSynchronize");
}

orError_t orStreamGetDevice(orStream_t stream, int* device) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (device == nullptr)
    return fail(orErrorInvalidValue, "orStreamGetDevice: device is NULL");
  const std::shared_ptr<Stream> target = findStream(stream, "orStreamGetDevice");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  *device = target->device();
  return orSuccess;
}

orError_t orStreamGetPriority(orStream_t stream, int* priority) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (priority == nullptr) {
    return fail(orErrorInvalidValue, "orStreamGetPriority: priority is NULL");
  }
  const std::shared_ptr<Stream> target = findStream(stream, "orStreamGetPriority");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  *priority = target->priority();
  return orSuccess;
}

orError_t orDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (leastPriority == nullptr || greatestPriority == nullptr) {
    return fail(orErrorInvalidValue, "orDeviceGetStreamPriorityRange: leastPriority or greatestPriority is NULL");
  }
  *leastPriority = kLeastPriority;
  *greatestPriority = kGreatestPriority;
  return orSuccess;
}

orError_t orLaunchHostFunc(orStream_t stream, void (*fn)(void*), void* userData) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (fn == nullptr)
    return fail(orErrorInvalidValue, "orLaunchHostFunc: fn is NULL");
  const std::shared_ptr<Stream> target = findStream(stream, "orLaunchHostFunc");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  if (!activityRecording()) {
    return target->submit("orLaunchHostFunc", [fn, userData] { fn(userData); });
  }
  ActivityEntry activity{orActivityKindHostFunc, "Host function", target->device(), stream, currentCorrelationId(), 0};
  return target->submit("orLaunchHostFunc", [fn, userData, activity]() mutable {
    activity.start = activityTimestamp();
    fn(userData);
    activity.end = activityTimestamp();
    addActivity(std::move(activity));
  });
}
