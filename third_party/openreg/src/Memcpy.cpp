#include <memory>
#include <optional>
#include <utility>

#include "Activity.h"
#include "CompletionChecks.h"
#include "CopyBytes.h"
#include "DeviceMemory.h"
#include "Error.h"
#include "ReadSection.h"
#include "Stream.h"

using namespace openreg::runtime;

namespace {

// The entry point and its message context per kind, so the success path
// formats nothing.
struct Api {
  const char* name;
  const char* context[4];
};

constexpr Api kMemcpy{
    "orMemcpy", {"orMemcpy HostToHost", "orMemcpy HostToDevice", "orMemcpy DeviceToHost", "orMemcpy DeviceToDevice"}};
constexpr Api kMemcpyAsync{
    "orMemcpyAsync",
    {"orMemcpyAsync HostToHost", "orMemcpyAsync HostToDevice", "orMemcpyAsync DeviceToHost",
     "orMemcpyAsync DeviceToDevice"}};

// One end of a copy: the pointer as given and, for a device end, its device.
struct End {
  const char* role;  // "destination" or "source"
  uintptr_t address;
  bool onDevice;
  Device* device = nullptr;
};

// The checks that need no lock: a device end must be in an arena, a host end
// must stay clear of every arena's user view.
orError_t locate(const Config& config, End& end, size_t count, const char* context) {
  if (end.onDevice) {
    end.device = deviceContaining(config, end.address);
    if (end.device == nullptr) {
      return fail(
          orErrorInvalidDevicePointer, "%s: the %s %p is not a device pointer", context, end.role,
          reinterpret_cast<void*>(end.address));
    }
  } else if (overlapsDeviceMemory(config, end.address, count)) {
    return fail(
        orErrorInvalidMemcpyDirection, "%s: the %s range [%p, +%zu bytes) is device memory, not host memory", context,
        end.role, reinterpret_cast<void*>(end.address), count);
  }
  return orSuccess;
}

// Inside a ReadSection: the address to copy through, or null. A device end's
// allocation is stored in *allocation.
void* hostAddress(const End& end, size_t count, const char* context, Allocation** allocation) {
  if (!end.onDevice)
    return reinterpret_cast<void*>(end.address);
  uintptr_t base;
  *allocation =
      findAllocation(*end.device, *currentAllocations(*end.device), end.address, count, context, end.role, &base);
  if (*allocation == nullptr)
    return nullptr;
  return (*allocation)->hostAddress(end.address);
}

// The validation shared by orMemcpy and orMemcpyAsync. A valid, non-empty copy
// is handed to transfer(target, origin, allocations) inside a ReadSection, so
// neither allocation can be freed meanwhile (orFree waits for the section's
// end); allocations holds the destination's and the source's (null for a
// host end). A queued copy's allocations are pinned first (QueuedCopy), since
// it runs after the section.
template <typename Transfer>
orError_t checkCopy(
    const Config& config, const Api& api, void* dst, const void* src, size_t count, orMemcpyKind kind, bool queued,
    Transfer&& transfer) {
  // Compared as int: C callers can pass any value.
  const int kindValue = static_cast<int>(kind);
  if (kindValue < orMemcpyHostToHost || kindValue > orMemcpyDeviceToDevice) {
    return fail(orErrorInvalidValue, "%s: unknown kind %d (expected 0..3)", api.name, kindValue);
  }
  if (count == 0)
    return orSuccess;
  const char* context = api.context[kind];
  if (dst == nullptr || src == nullptr) {
    return fail(orErrorInvalidValue, "%s: dst %p or src %p is NULL (count %zu)", context, dst, src, count);
  }
  End to{
      "destination", reinterpret_cast<uintptr_t>(dst), kind == orMemcpyHostToDevice || kind == orMemcpyDeviceToDevice};
  End from{"source", reinterpret_cast<uintptr_t>(src), kind == orMemcpyDeviceToHost || kind == orMemcpyDeviceToDevice};
  if (const orError_t error = locate(config, to, count, context); error != orSuccess)
    return error;
  if (const orError_t error = locate(config, from, count, context); error != orSuccess) {
    return error;
  }

  const ReadSection section;
  Allocation* allocations[2] = {nullptr, nullptr};
  void* target = hostAddress(to, count, context, &allocations[0]);
  if (target == nullptr)
    return orErrorInvalidDevicePointer;
  const void* origin = hostAddress(from, count, context, &allocations[1]);
  if (origin == nullptr)
    return orErrorInvalidDevicePointer;
  if (queued) {
    const End* ends[2] = {&to, &from};
    for (int i = 0; i < 2; ++i) {
      if (allocations[i] == nullptr || allocations[i]->addUses(Allocation::kQueuedCopy))
        continue;
      // orFree released it meanwhile.
      if (i == 1 && allocations[0] != nullptr) {
        allocations[0]->uses.fetch_sub(Allocation::kQueuedCopy, std::memory_order_relaxed);
      }
      return notInsideAllocation(*ends[i]->device, ends[i]->address, context, ends[i]->role);
    }
  }
  transfer(target, origin, allocations);
  return orSuccess;
}

// A copy waiting in a stream. It pins the allocations it touches until it
// has run, so the worker copies without taking any device lock.
struct QueuedCopy {
  // The allocations were pinned by checkCopy.
  QueuedCopy(void* target, const void* origin, size_t count, Allocation* const allocations[2])
      : target(target), origin(origin), count(count), pinned{allocations[0], allocations[1]} {}

  void unpin() const {
    // Release: orFree, seeing the count drop, also sees the copy done.
    for (Allocation* allocation : pinned) {
      if (allocation != nullptr) {
        allocation->uses.fetch_sub(Allocation::kQueuedCopy, std::memory_order_release);
      }
    }
  }

  void* target;
  const void* origin;
  size_t count;
  Allocation* pinned[2];
};

// The device a synchronous copy is recorded on: the device end's (the
// destination's for a device-to-device copy), the current device for a
// host-to-host copy.
int copyDevice(const void* dst, const void* src, orMemcpyKind kind) {
  const Config* config = runtimeConfig();
  if (kind == orMemcpyHostToDevice || kind == orMemcpyDeviceToDevice) {
    return deviceContaining(*config, reinterpret_cast<uintptr_t>(dst))->index;
  }
  if (kind == orMemcpyDeviceToHost) {
    return deviceContaining(*config, reinterpret_cast<uintptr_t>(src))->index;
  }
  return currentDevice();
}

}  // namespace

orError_t orMemcpy(void* dst, const void* src, size_t count, orMemcpyKind kind) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  return checkCopy(
      *config, kMemcpy, dst, src, count, kind, /*queued=*/false,
      [&](void* target, const void* origin, Allocation* const*) {
        std::optional<ActivityEntry> activity;
        if (activityRecording() && !insideRecordedKernel()) {
          activity = memcpyActivity(copyDevice(dst, src, kind), nullptr, kind, count);
        }
        // A same-device or host-to-host copy may overlap.
        copyBytes(target, origin, count);
        if (activity) {
          activity->end = activityTimestamp();
          addActivity(std::move(*activity));
        }
      });
}

orError_t orMemcpyAsync(void* dst, const void* src, size_t count, orMemcpyKind kind, orStream_t stream) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  const std::shared_ptr<Stream> queue = findStream(stream, "orMemcpyAsync");
  if (queue == nullptr)
    return orErrorInvalidResourceHandle;
  std::optional<QueuedCopy> copy;
  if (const orError_t error = checkCopy(
          *config, kMemcpyAsync, dst, src, count, kind, /*queued=*/true,
          [&](void* target, const void* origin, Allocation* const* allocations) {
            copy.emplace(target, origin, count, allocations);
          });
      error != orSuccess || !copy) {
    return error;  // invalid, or an empty copy with nothing to queue
  }
  std::shared_ptr<CheckedCopy> checked;
  if (completionChecks().on() && kind != orMemcpyDeviceToDevice) {
    checked = CheckedCopy::issue(copy->target, copy->origin, count, kind, kMemcpyAsync.context[kind], *queue);
    if (checked == nullptr) {
      copy->unpin();
      return orErrorMemoryAllocation;
    }
  }
  // Stamped when the stream runs the copy; tagged with the launching thread's
  // correlation id now.
  std::optional<ActivityEntry> activity;
  if (activityRecording())
    activity = memcpyActivity(queue->device(), stream, kind, count);
  const orError_t error = queue->submit("orMemcpyAsync", [copy = *copy, activity, checked]() mutable {
    if (activity)
      activity->start = activityTimestamp();
    if (checked) {
      checked->run();
    } else {
      copyBytes(copy.target, copy.origin, copy.count);
    }
    copy.unpin();
    if (activity) {
      activity->end = activityTimestamp();
      addActivity(std::move(*activity));
    }
  });
  if (error != orSuccess)
    copy->unpin();
  return error;
}
