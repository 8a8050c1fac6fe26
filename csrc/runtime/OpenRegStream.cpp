#include "runtime/OpenRegStream.h"

#include <array>
#include <atomic>
#include <mutex>

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGuard.h"
#include "sanitizer/SanitizerTrace.h"

namespace c10::openreg {
namespace {

constexpr int kMaxDevices = 16;
constexpr int kStreamsPerPool = 32;
constexpr int kPriorityLevels = 3;  // priorities 0, -1, -2
// Stream ids: 0 is the default stream; 1 + level * kStreamsPerPool + index a
// pool stream; an external stream is its runtime handle with this bit set.
constexpr c10::StreamId kExternalBit = c10::StreamId(1) << 62;

struct DevicePools {
  std::once_flag once;
  std::array<std::array<orStream_t, kStreamsPerPool>, kPriorityLevels> streams{};
  std::array<std::atomic<uint32_t>, kPriorityLevels> next{};
};

std::array<DevicePools, kMaxDevices> g_pools;
thread_local std::array<c10::StreamId, kMaxDevices> t_current_ids{};

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return device;
}

int greatest_priority() {
  int least = 0;
  int greatest = 0;
  OPENREG_CHECK(orDeviceGetStreamPriorityRange(&least, &greatest));
  return greatest;
}

DevicePools& pools_for(c10::DeviceIndex device) {
  DevicePools& pools = g_pools[device];
  std::call_once(pools.once, [&] {
    OpenRegGuard guard(device);
    for (int level = 0; level < kPriorityLevels; ++level) {
      for (auto& stream : pools.streams[level]) {
        OPENREG_CHECK(orStreamCreateWithPriority(&stream, 0, -level));
      }
    }
  });
  return pools;
}

c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, make_device(device), id);
}

}  // namespace

void OpenRegStream::throw_not_openreg(c10::Stream stream) {
  TORCH_CHECK(false, "Expected an openreg stream, got a stream of ", stream.device());
}

orStream_t OpenRegStream::pooled_or_external_handle() const {
  const c10::StreamId id = stream_.id();
  if (id & kExternalBit) {
    return reinterpret_cast<orStream_t>(id & ~kExternalBit);
  }
  const int slot = static_cast<int>(id - 1);
  return pools_for(device_index()).streams[slot / kStreamsPerPool][slot % kStreamsPerPool];
}

int OpenRegStream::priority() const {
  int priority = 0;
  OpenRegGuard guard(stream_.device());  // a null handle means this device's default
  OPENREG_CHECK(orStreamGetPriority(handle(), &priority));
  return priority;
}

bool OpenRegStream::query() const {
  OpenRegGuard guard(stream_.device());
  const orError_t err = orStreamQuery(handle());
  if (err != orErrorNotReady) {
    OPENREG_CHECK(err);
  }
  if (sanitizer::enabled()) {
    if (sanitizer::answer_not_ready(sanitizer::stream_id(stream_), err == orErrorNotReady)) {
      return false;
    }
    synchronize();  // completes the held-back work, and reports it to the checker
    return true;
  }
  return err == orSuccess;
}

void OpenRegStream::synchronize() const {
  // A null handle (the default stream) means the current device's, so the
  // stream's device must be current; host executions synchronize on every
  // call, so skip the guard when it already is.
  const c10::DeviceIndex previous = exchange_device(stream_.device_index());
  const orError_t err = orStreamSynchronize(handle());
  if (previous != stream_.device_index()) {
    set_device(previous);
  }
  OPENREG_CHECK(err);
  sanitizer::trace(
      [&](const auto& t) { t.trace_gpu_stream_synchronization(c10::kPrivateUse1, sanitizer::stream_id(stream_)); });
}

OpenRegStream getDefaultOpenRegStream(c10::DeviceIndex device) {
  return OpenRegStream(make_stream(resolve(device), 0));
}

OpenRegStream getCurrentOpenRegStream(c10::DeviceIndex device) {
  device = resolve(device);
  return OpenRegStream(make_stream(device, t_current_ids[device]));
}

void setCurrentOpenRegStream(OpenRegStream stream) {
  t_current_ids[resolve(stream.device_index())] = stream.id();
}

OpenRegStream getStreamFromPool(int priority, c10::DeviceIndex device) {
  device = resolve(device);
  // Clamp into the runtime's range, as CUDA does: 0 is the lowest priority.
  const int level = std::clamp(-priority, 0, std::min(kPriorityLevels - 1, -greatest_priority()));
  DevicePools& pools = pools_for(device);
  const uint32_t index = pools.next[level]++ % kStreamsPerPool;
  return OpenRegStream(make_stream(device, 1 + level * kStreamsPerPool + index));
}

OpenRegStream getStreamFromPool(bool isHighPriority, c10::DeviceIndex device) {
  return getStreamFromPool(isHighPriority ? greatest_priority() : 0, device);
}

OpenRegStream getStreamFromExternal(orStream_t handle, c10::DeviceIndex device) {
  TORCH_CHECK(handle != nullptr, "getStreamFromExternal: the default stream is not external");
  const auto id = static_cast<c10::StreamId>(reinterpret_cast<uintptr_t>(handle));
  TORCH_CHECK((id & kExternalBit) == 0, "getStreamFromExternal: unexpected stream handle ", handle);
  return OpenRegStream(make_stream(resolve(device), id | kExternalBit));
}

}  // namespace c10::openreg
