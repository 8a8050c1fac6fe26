#include "Stream.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <utility>
#include <vector>

#include "Activity.h"
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

}  // namespace

Stream::Stream(uintptr_t handle, int device, int priority) : handle_(handle), device_(device), priority_(priority) {}

orError_t Stream::submit(const char* context, std::function<void()> task, bool marker) {
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
  pendingTasks[device_].fetch_add(1, std::memory_order_relaxed);
  lock.unlock();
  workQueued_.notify_one();
  return orSuccess;
}

bool Stream::idle() {
  std::lock_guard lock(mutex_);
  return completed_ == submitted_;
}

void Stream::synchronize() {
  std::unique_lock lock(mutex_);
  const uint64_t target = submitted_;
  workCompleted_.wait(lock, [&] { return completed_ >= target; });
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
    workQueued_.wait(lock, [this] { return !tasks_.empty() || stopping_; });
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

void synchronizeDevice(int index) {
  if (pendingTasks[index].load(std::memory_order_acquire) == 0)
    return;
  std::vector<std::shared_ptr<Stream>> pending{defaultStream(index)};
  streams().forEach([&](const std::shared_ptr<Stream>& stream) {
    if (stream->device() == index)
      pending.push_back(stream);
  });
  for (const std::shared_ptr<Stream>& stream : pending)
    stream->synchronize();
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
  return orSuccess;
}

orError_t orStreamQuery(orStream_t stream) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  const std::shared_ptr<Stream> target = findStream(stream, "orStreamQuery");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  if (!target->idle()) {
    return fail(
        orErrorNotReady, "orStreamQuery: stream %p of device %d has work in progress", static_cast<void*>(stream),
        target->device());
  }
  return orSuccess;
}

orError_t orStreamSynchronize(orStream_t stream) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  // Hosts synchronize with the default stream before every host-side read;
  // when nothing is pending on the device at all, that needs no lock.
  // Acquire: pairs with the release in Stream::complete.
  if (stream == nullptr && pendingTasks[currentDevice()].load(std::memory_order_acquire) == 0) {
    return orSuccess;
  }
  const std::shared_ptr<Stream> target = findStream(stream, "orStreamSynchronize");
  if (target == nullptr)
    return orErrorInvalidResourceHandle;
  target->synchronize();
  return orSuccess;
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
