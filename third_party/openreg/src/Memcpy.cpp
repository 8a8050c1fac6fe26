#include <cstring>
#include <utility>
#include <mutex>
#include <shared_mutex>

#include "DeviceMemory.h"
#include "Error.h"

using namespace openreg::runtime;

namespace {

// Message context per kind, so the success path formats nothing.
const char* const kContext[] = {"orMemcpy HostToHost", "orMemcpy HostToDevice",
                                "orMemcpy DeviceToHost", "orMemcpy DeviceToDevice"};

// One end of a copy: the pointer as given and, for a device end, its device.
struct End {
  const char* role;  // "destination" or "source"
  uintptr_t address;
  bool onDevice;
  Device* device = nullptr;
};

// The checks that need no lock: a device end must be in an arena, a host end
// must stay clear of every arena's user view.
orError_t locate(const Config& config, End& end, size_t count, orMemcpyKind kind) {
  if (end.onDevice) {
    end.device = deviceContaining(config, end.address);
    if (end.device == nullptr) {
      return fail(orErrorInvalidDevicePointer, "%s: the %s %p is not a device pointer",
                  kContext[kind], end.role, reinterpret_cast<void*>(end.address));
    }
  } else if (overlapsDeviceMemory(config, end.address, count)) {
    return fail(orErrorInvalidMemcpyDirection,
                "%s: the %s range [%p, +%zu bytes) is device memory, not host memory",
                kContext[kind], end.role, reinterpret_cast<void*>(end.address), count);
  }
  return orSuccess;
}

// With end.device's mutex held: the address to copy through, or null.
void* hostAddress(const End& end, size_t count, orMemcpyKind kind) {
  if (!end.onDevice) return reinterpret_cast<void*>(end.address);
  uintptr_t base;
  if (!findAllocation(*end.device, end.address, count, kContext[kind], end.role, &base)) {
    return nullptr;
  }
  return end.device->arena.load(std::memory_order_relaxed)->hostAddress(end.address);
}

}  // namespace

orError_t orMemcpy(void* dst, const void* src, size_t count, orMemcpyKind kind) {
  const Config* config = runtimeConfig();
  if (config == nullptr) return orErrorInitializationError;
  // Compared as int: C callers can pass any value.
  const int kindValue = static_cast<int>(kind);
  if (kindValue < orMemcpyHostToHost || kindValue > orMemcpyDeviceToDevice) {
    return fail(orErrorInvalidValue, "orMemcpy: unknown kind %d (expected 0..3)", kindValue);
  }
  if (count == 0) return orSuccess;
  if (dst == nullptr || src == nullptr) {
    return fail(orErrorInvalidValue, "%s: dst %p or src %p is NULL (count %zu)", kContext[kind],
                dst, src, count);
  }
  End to{"destination", reinterpret_cast<uintptr_t>(dst),
         kind == orMemcpyHostToDevice || kind == orMemcpyDeviceToDevice};
  End from{"source", reinterpret_cast<uintptr_t>(src),
           kind == orMemcpyDeviceToHost || kind == orMemcpyDeviceToDevice};
  if (const orError_t error = locate(*config, to, count, kind); error != orSuccess) return error;
  if (const orError_t error = locate(*config, from, count, kind); error != orSuccess) return error;

  // The shared locks are held through the copy so neither allocation can be
  // freed (and its pages punched) under it. Taken once for a same-device copy
  // (a thread must not lock a mutex it holds), else in device order so two
  // opposite cross-device copies cannot deadlock behind waiting writers.
  Device* first = to.device;
  Device* second = from.device;
  if (second == first) {
    second = nullptr;
  } else if (first != nullptr && second != nullptr && second->index < first->index) {
    std::swap(first, second);
  }
  std::shared_lock<std::shared_mutex> firstLock, secondLock;
  if (first != nullptr) firstLock = std::shared_lock(first->mutex);
  if (second != nullptr) secondLock = std::shared_lock(second->mutex);

  void* target = hostAddress(to, count, kind);
  if (target == nullptr) return orErrorInvalidDevicePointer;
  const void* origin = hostAddress(from, count, kind);
  if (origin == nullptr) return orErrorInvalidDevicePointer;
  // memmove: a same-device or host-to-host copy may overlap; for disjoint
  // ranges glibc's memmove runs at memcpy speed.
  std::memmove(target, origin, count);
  return orSuccess;
}
