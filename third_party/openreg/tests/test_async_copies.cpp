// Copies queued on streams: ordering, argument validation, and orFree waiting
// for queued copies that touch the allocation.
#include <algorithm>
#include <climits>

#include "harness.h"

namespace openreg_test {

void testAsyncCopies() {
  constexpr size_t kSize = 256 * KiB + 5;
  enum Wait { kStream, kDevice, kEvent };
  for (Wait wait : {kStream, kDevice, kEvent}) {
    orStream_t stream = nullptr;
    CHECK_OK(orStreamCreate(&stream));
    const std::vector<unsigned char> data = pattern(kSize, 10 + wait);
    std::vector<unsigned char> staged(kSize, 0), result(kSize, 0);
    void* a = nullptr;
    void* b = nullptr;
    CHECK_OK(orMalloc(&a, kSize));
    CHECK_OK(orMalloc(&b, kSize));
    // Each copy reads what the previous one wrote: only in-order execution
    // gives the data back.
    Gate gate;
    CHECK_OK(block(stream, gate));
    CHECK_OK(orMemcpyAsync(staged.data(), data.data(), kSize, orMemcpyHostToHost, stream));
    CHECK_OK(orMemcpyAsync(a, staged.data(), kSize, orMemcpyHostToDevice, stream));
    CHECK_OK(orMemcpyAsync(b, a, kSize, orMemcpyDeviceToDevice, stream));
    CHECK_OK(orMemcpyAsync(result.data(), b, kSize, orMemcpyDeviceToHost, stream));
    CHECK(result == std::vector<unsigned char>(kSize, 0));  // nothing ran yet
    CHECK_ERR(orStreamQuery(stream), orErrorNotReady);
    gate.open();
    if (wait == kStream) {
      CHECK_OK(orStreamSynchronize(stream));
    } else if (wait == kDevice) {
      CHECK_OK(orDeviceSynchronize());
    } else {
      orEvent_t event = nullptr;
      CHECK_OK(orEventCreate(&event));
      CHECK_OK(orEventRecord(event, stream));
      CHECK_OK(orEventSynchronize(event));
      CHECK_OK(orEventQuery(event));
      CHECK_OK(orEventDestroy(event));
    }
    CHECK(result == data);
    CHECK(readBack(b, kSize) == data);
    CHECK_OK(orStreamQuery(stream));
    CHECK_OK(orFree(a));
    CHECK_OK(orFree(b));
    CHECK_OK(orStreamDestroy(stream));
  }
}

void testMemcpyAsyncValidation() {
  constexpr size_t kSize = 64 * KiB;
  const std::vector<unsigned char> data = pattern(kSize, 20);
  std::vector<unsigned char> host(kSize);
  void* a = nullptr;
  void* b = nullptr;
  void* freed = nullptr;
  CHECK_OK(orMalloc(&a, kSize));
  CHECK_OK(orMalloc(&b, kSize));
  CHECK_OK(orMalloc(&freed, kPage));
  CHECK_OK(orFree(freed));
  CHECK_OK(orMemcpy(a, data.data(), kSize, orMemcpyHostToDevice));
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));

  // Each invalid copy fails at the call, with orMemcpy's code and message
  // (naming orMemcpyAsync instead), and queues nothing.
  struct Case {
    void* dst;
    const void* src;
    size_t count;
    int kind;
    orError_t expected;
  };
  const Case cases[] = {
      {a, data.data(), 1, 4, orErrorInvalidValue},
      {a, data.data(), 1, -1, orErrorInvalidValue},
      {nullptr, data.data(), 1, orMemcpyHostToHost, orErrorInvalidValue},
      {a, nullptr, 1, orMemcpyHostToDevice, orErrorInvalidValue},
      {host.data(), data.data(), 1, orMemcpyHostToDevice, orErrorInvalidDevicePointer},
      {host.data(), host.data(), 1, orMemcpyDeviceToHost, orErrorInvalidDevicePointer},
      {a, b, 1, orMemcpyHostToDevice, orErrorInvalidMemcpyDirection},
      {b, a, 1, orMemcpyDeviceToHost, orErrorInvalidMemcpyDirection},
      {host.data(), a, 1, orMemcpyHostToHost, orErrorInvalidMemcpyDirection},
      {offset(a, kSize - 10), data.data(), 11, orMemcpyHostToDevice, orErrorInvalidDevicePointer},
      {b, a, kSize + 1, orMemcpyDeviceToDevice, orErrorInvalidDevicePointer},
      {offset(a, 1), a, SIZE_MAX, orMemcpyDeviceToDevice, orErrorInvalidDevicePointer},
      {freed, data.data(), 1, orMemcpyHostToDevice, orErrorInvalidDevicePointer},
  };
  for (const Case& c : cases) {
    const orMemcpyKind kind = static_cast<orMemcpyKind>(c.kind);
    CHECK_ERR(orMemcpy(c.dst, c.src, c.count, kind), c.expected);
    std::string expected = orGetLastErrorMessage();
    expected.replace(0, std::strlen("orMemcpy"), "orMemcpyAsync");
    CHECK_ERR(orMemcpyAsync(c.dst, c.src, c.count, kind, stream), c.expected);
    CHECK(orGetLastErrorMessage() == expected);
  }
  CHECK_OK(orStreamQuery(stream));
  // Count 0 succeeds whatever the pointers, and so queues nothing.
  CHECK_OK(orMemcpyAsync(nullptr, nullptr, 0, orMemcpyDeviceToDevice, stream));
  CHECK_OK(orMemcpyAsync(host.data(), reinterpret_cast<void*>(16), 0, orMemcpyDeviceToHost, nullptr));
  CHECK(readBack(a, kSize) == data);
  CHECK_OK(orStreamDestroy(stream));
  CHECK_OK(orFree(a));
  CHECK_OK(orFree(b));
}

void testFreeWaitsForQueuedCopies() {
  constexpr size_t kSize = 1 * MiB;
  const std::vector<unsigned char> data = pattern(kSize, 30);
  const size_t initial = freeBytes();
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  const auto delay = [](orStream_t on) { CHECK_OK(launch(on, [] { std::this_thread::sleep_for(50ms); })); };

  // A pending device-to-host copy out of the allocation.
  void* ptr = nullptr;
  CHECK_OK(orMalloc(&ptr, kSize));
  CHECK_OK(orMemcpy(ptr, data.data(), kSize, orMemcpyHostToDevice));
  std::vector<unsigned char> out(kSize, 0);
  delay(stream);
  CHECK_OK(orMemcpyAsync(out.data(), ptr, kSize, orMemcpyDeviceToHost, stream));
  const Clock::time_point start = Clock::now();
  CHECK_OK(orFree(ptr));
  CHECK(millisecondsSince(start) >= 30);
  CHECK(out == data);  // no synchronization needed: orFree waited
  CHECK_OK(orStreamQuery(stream));

  // A pending host-to-device copy into it.
  CHECK_OK(orMalloc(&ptr, kSize));
  delay(stream);
  CHECK_OK(orMemcpyAsync(ptr, data.data(), kSize, orMemcpyHostToDevice, stream));
  CHECK_OK(orFree(ptr));
  CHECK_OK(orStreamQuery(stream));
  CHECK(freeBytes() == initial);

  // Queued on another device's stream: the allocation stays pinned until the
  // copy has run.
  orStream_t other = nullptr;
  CHECK_OK(orSetDevice(1));
  CHECK_OK(orStreamCreate(&other));
  CHECK_OK(orSetDevice(0));
  CHECK_OK(orMalloc(&ptr, kSize));
  CHECK_OK(orMemcpy(ptr, data.data(), kSize, orMemcpyHostToDevice));
  std::fill(out.begin(), out.end(), 0);
  delay(other);
  CHECK_OK(orMemcpyAsync(out.data(), ptr, kSize, orMemcpyDeviceToHost, other));
  CHECK_OK(orFree(ptr));
  CHECK(out == data);
  CHECK(freeBytes() == initial);

  // Work queued on another device only does not delay orFree (nor
  // orDeviceSynchronize) on this one.
  Gate gate;
  CHECK_OK(block(other, gate));
  CHECK_OK(orMalloc(&ptr, kSize));
  const Clock::time_point idleStart = Clock::now();
  CHECK_OK(orFree(ptr));
  CHECK_OK(orDeviceSynchronize());
  CHECK(millisecondsSince(idleStart) < 1000);
  CHECK(!gate.isOpen());
  gate.open();
  CHECK_OK(orStreamDestroy(other));
  CHECK_OK(orStreamDestroy(stream));
}

}  // namespace openreg_test
