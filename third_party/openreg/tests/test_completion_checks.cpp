// Completion checks (orSetCompletionChecks): work held back until something
// needs it, poisoned host destinations and snapshotted host sources. Every
// test turns the mode on and leaves it off.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "harness.h"

namespace openreg_test {
namespace {

constexpr int kRepeats = 100;
constexpr size_t kSize = kPage + 13;

bool allPoison(const std::vector<unsigned char>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](unsigned char byte) { return byte == 0xFF; });
}

template <typename T>
T as(const std::vector<unsigned char>& bytes) {
  T value;
  std::memcpy(&value, bytes.data(), sizeof value);
  return value;
}

// The ways the host can need a stream's work complete. Each queues what it
// needs (an event record) first, then waits; stream is not destroyed.
enum Observer { kStreamSync, kEventSync, kDeviceSync, kObservers };
const char* const kObserverNames[kObservers] = {"orStreamSynchronize", "orEventSynchronize", "orDeviceSynchronize"};

orError_t observe(Observer observer, orStream_t stream, orEvent_t event) {
  switch (observer) {
    case kStreamSync:
      return orStreamSynchronize(stream);
    case kEventSync:
      CHECK_OK(orEventRecord(event, stream));
      return orEventSynchronize(event);
    default:
      return orDeviceSynchronize();
  }
}

// Polls until done() or 10 s have passed.
bool eventually(const std::function<bool()>& done) {
  const Clock::time_point start = Clock::now();
  while (!done() && millisecondsSince(start) < 10000)
    std::this_thread::sleep_for(100us);
  return done();
}

}  // namespace

void testCompletionChecksMode() {
  int enabled = -1;
  CHECK_OK(orGetCompletionChecks(&enabled));
  CHECK(enabled == 0);
  CHECK_ERR(orGetCompletionChecks(nullptr), orErrorInvalidValue);
  CHECK_ERR(orSetCompletionChecks(2), orErrorInvalidValue);
  CHECK_MESSAGE_HAS("enabled is 2");
  CHECK_ERR(orSetCompletionChecks(-1), orErrorInvalidValue);
  CHECK_OK(orSetCompletionChecks(1));
  CHECK_OK(orGetCompletionChecks(&enabled));
  CHECK(enabled == 1);
  CHECK_OK(orSetCompletionChecks(1));  // idempotent
  CHECK_OK(orSetCompletionChecks(0));
  CHECK_OK(orGetCompletionChecks(&enabled));
  CHECK(enabled == 0);
}

// A device-to-host destination holds poison until something needs the copy,
// whatever that is, then the data.
void testCheckedDeviceToHost() {
  const std::vector<unsigned char> data = pattern(kSize, 50);
  void* dev = nullptr;
  CHECK_OK(orMalloc(&dev, kSize));
  CHECK_OK(orMemcpy(dev, data.data(), kSize, orMemcpyHostToDevice));
  orStream_t stream = nullptr;
  orEvent_t event = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  CHECK_OK(orEventCreate(&event));
  CHECK_OK(orSetCompletionChecks(1));

  std::vector<unsigned char> out(kSize, 0);
  CHECK_OK(orMemcpyAsync(out.data(), dev, kSize, orMemcpyDeviceToHost, stream));
  // Poison reads as NaN in every floating-point type and -1 in every signed
  // integer type.
  CHECK(std::isnan(as<float>(out)) && std::isnan(as<double>(out)));
  const uint16_t half = as<uint16_t>(out);
  CHECK((half & 0x7C00) == 0x7C00 && (half & 0x03FF) != 0);  // float16
  CHECK((half & 0x7F80) == 0x7F80 && (half & 0x007F) != 0);  // bfloat16
  CHECK(as<int8_t>(out) == -1 && as<int16_t>(out) == -1 && as<int32_t>(out) == -1 && as<int64_t>(out) == -1);
  CHECK_OK(orStreamSynchronize(stream));
  CHECK(out == data);

  for (int i = 0; i < kRepeats; ++i) {
    const Observer observer = static_cast<Observer>(i % kObservers);
    std::fill(out.begin(), out.end(), 0);
    CHECK_OK(orMemcpyAsync(out.data(), dev, kSize, orMemcpyDeviceToHost, stream));
    CHECK(allPoison(out));
    std::this_thread::yield();
    CHECK(allPoison(out));  // however late the host reads
    const orError_t error = observe(observer, stream, event);
    record(error == orSuccess, kObserverNames[observer], __FILE__, __LINE__, errorDetail(error));
    CHECK(out == data);
  }
  CHECK_OK(orSetCompletionChecks(0));
  CHECK_OK(orEventDestroy(event));
  CHECK_OK(orStreamDestroy(stream));
  CHECK_OK(orFree(dev));
}

// The host writes into a host-to-device source between the call and the
// copy: the first call that observes the copy reports it, once; the copy
// takes the changed data.
void testCheckedHostWrite() {
  void* dev = nullptr;
  CHECK_OK(orMalloc(&dev, kSize));
  orStream_t stream = nullptr;
  orEvent_t event = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  CHECK_OK(orEventCreate(&event));
  CHECK_OK(orSetCompletionChecks(1));
  std::vector<unsigned char> source = pattern(kSize, 51);
  const std::string range = "[" + handleText(source.data()) + ", " + handleText(source.data() + kSize) + ")";
  for (int i = 0; i < kRepeats; ++i) {
    const Observer observer = static_cast<Observer>(i % kObservers);
    const size_t at = (i * 97u) % kSize;
    CHECK_OK(orMemcpyAsync(dev, source.data(), kSize, orMemcpyHostToDevice, stream));
    source[at] ^= 0x5A;
    const orError_t error = observe(observer, stream, event);
    record(
        error == orErrorHostWriteDuringCopy, std::string(kObserverNames[observer]) + " reports the write", __FILE__,
        __LINE__, errorDetail(error));
    CHECK_MESSAGE_HAS(std::string(kObserverNames[observer]) + ": the host wrote into " + range);
    CHECK_MESSAGE_HAS("orMemcpyAsync HostToDevice of " + std::to_string(kSize) + " bytes");
    CHECK_MESSAGE_HAS("on stream " + handleText(stream) + " of device 0");
    CHECK_MESSAGE_HAS("first changed byte at offset " + std::to_string(at) + ")");
    CHECK(readBack(dev, kSize) == source);
    CHECK_OK(observe(observer, stream, event));  // reported once
  }

  // Several before one observer: the first is named, the others counted.
  for (size_t at : {5, 7, 9}) {
    CHECK_OK(orMemcpyAsync(dev, source.data(), kSize, orMemcpyHostToDevice, stream));
    source[at] ^= 1;
  }
  CHECK_ERR(orStreamSynchronize(stream), orErrorHostWriteDuringCopy);
  CHECK_MESSAGE_HAS("offset 5); the copy took the changed data (and 2 more copies on this stream)");
  CHECK_OK(orStreamSynchronize(stream));

  // An event reports only what completed up to its record.
  CHECK_OK(orEventRecord(event, stream));
  CHECK_OK(orMemcpyAsync(dev, source.data(), kSize, orMemcpyHostToDevice, stream));
  source[0] ^= 1;
  CHECK_OK(orEventSynchronize(event));
  CHECK_ERR(orStreamSynchronize(stream), orErrorHostWriteDuringCopy);

  // orFree completes it but leaves the report to the host's next
  // synchronization; orStreamDestroy reports what it completed.
  CHECK_OK(orMemcpyAsync(dev, source.data(), kSize, orMemcpyHostToDevice, stream));
  source[1] ^= 1;
  void* other = nullptr;
  CHECK_OK(orMalloc(&other, kPage));
  CHECK_OK(orFree(other));
  CHECK_ERR(orDeviceSynchronize(), orErrorHostWriteDuringCopy);
  CHECK_OK(orDeviceSynchronize());
  CHECK_OK(orMemcpyAsync(dev, source.data(), kSize, orMemcpyHostToDevice, stream));
  source[2] ^= 1;
  CHECK_ERR(orStreamDestroy(stream), orErrorHostWriteDuringCopy);
  CHECK_MESSAGE_HAS("orStreamDestroy: the host wrote into " + range);
  CHECK_ERR(orStreamQuery(stream), orErrorInvalidResourceHandle);  // destroyed all the same

  // On the default stream, whose synchronization has a lock-free path.
  CHECK_OK(orMemcpyAsync(dev, source.data(), kSize, orMemcpyHostToDevice, nullptr));
  source[3] ^= 1;
  CHECK_ERR(orStreamSynchronize(nullptr), orErrorHostWriteDuringCopy);
  CHECK_MESSAGE_HAS("on stream " + handleText(nullptr) + " of device 0");
  CHECK_OK(orStreamSynchronize(nullptr));
  CHECK(readBack(dev, kSize) == source);

  // Found after the mode was turned off: still reported, once.
  CHECK_OK(orMemcpyAsync(dev, source.data(), kSize, orMemcpyHostToDevice, nullptr));
  source[4] ^= 1;
  CHECK_OK(orSetCompletionChecks(0));
  CHECK_ERR(orStreamSynchronize(nullptr), orErrorHostWriteDuringCopy);
  CHECK_OK(orStreamSynchronize(nullptr));
  CHECK_OK(orEventDestroy(event));
  CHECK_OK(orFree(dev));
}

// Sources the host leaves alone are not reported, including bytes that the
// stream's own earlier copies write into them.
void testCheckedHostSource() {
  void* dev = nullptr;
  void* second = nullptr;
  CHECK_OK(orMalloc(&dev, kSize));
  CHECK_OK(orMalloc(&second, kSize));
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  CHECK_OK(orSetCompletionChecks(1));
  for (int i = 0; i < kRepeats; ++i) {
    const std::vector<unsigned char> data = pattern(kSize, 60 + i);
    const std::vector<unsigned char> next = pattern(kSize, 61 + i);
    CHECK_OK(orMemcpyAsync(dev, data.data(), kSize, orMemcpyHostToDevice, stream));
    CHECK_OK(orStreamSynchronize(stream));
    CHECK(readBack(dev, kSize) == data);

    // Staged through host memory: a host-to-host copy, then a copy from its
    // destination (queued while that still holds poison).
    std::vector<unsigned char> staged(kSize, 0);
    CHECK_OK(orMemcpyAsync(staged.data(), next.data(), kSize, orMemcpyHostToHost, stream));
    CHECK(allPoison(staged));
    CHECK_OK(orMemcpyAsync(second, staged.data(), kSize, orMemcpyHostToDevice, stream));
    CHECK_OK(orStreamSynchronize(stream));
    CHECK(readBack(second, kSize) == next);

    // A round trip: out of the device into host memory and back.
    std::vector<unsigned char> bounce(kSize, 0);
    CHECK_OK(orMemcpyAsync(bounce.data(), dev, kSize, orMemcpyDeviceToHost, stream));
    CHECK_OK(orMemcpyAsync(second, bounce.data(), kSize, orMemcpyHostToDevice, stream));
    CHECK_OK(orStreamSynchronize(stream));
    CHECK(bounce == data && readBack(second, kSize) == data);

    // The reverse: a queued copy still has to read the bytes that a later
    // one overwrites, so they are not poisoned under it.
    std::vector<unsigned char> reused = next;
    CHECK_OK(orMemcpyAsync(second, reused.data(), kSize, orMemcpyHostToDevice, stream));
    CHECK_OK(orMemcpyAsync(reused.data(), dev, kSize, orMemcpyDeviceToHost, stream));
    CHECK(reused == next);
    CHECK_OK(orStreamSynchronize(stream));
    CHECK(readBack(second, kSize) == next && reused == data);

    // An overlapping host-to-host copy reads its own destination.
    std::vector<unsigned char> shifted = data;
    CHECK_OK(orMemcpyAsync(shifted.data() + 1, shifted.data(), kSize - 1, orMemcpyHostToHost, stream));
    CHECK_OK(orStreamSynchronize(stream));
    CHECK(std::equal(data.begin(), data.end() - 1, shifted.begin() + 1));
  }
  CHECK_OK(orSetCompletionChecks(0));
  CHECK_OK(orStreamDestroy(stream));
  CHECK_OK(orFree(dev));
  CHECK_OK(orFree(second));
}

// An event completes the work up to its record, and leaves the rest held.
void testCheckedEventOrder() {
  const std::vector<unsigned char> data = pattern(kSize, 70);
  void* dev = nullptr;
  CHECK_OK(orMalloc(&dev, kSize));
  CHECK_OK(orMemcpy(dev, data.data(), kSize, orMemcpyHostToDevice));
  orStream_t stream = nullptr;
  orEvent_t event = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  CHECK_OK(orEventCreate(&event));
  CHECK_OK(orSetCompletionChecks(1));
  for (int i = 0; i < kRepeats; ++i) {
    std::vector<unsigned char> before(kSize, 0), after(kSize, 0);
    bool beforeRan = false, afterRan = false;
    CHECK_OK(launch(stream, [&] { beforeRan = true; }));
    CHECK_OK(orMemcpyAsync(before.data(), dev, kSize, orMemcpyDeviceToHost, stream));
    CHECK_OK(orEventRecord(event, stream));
    CHECK_OK(orMemcpyAsync(after.data(), dev, kSize, orMemcpyDeviceToHost, stream));
    CHECK_OK(launch(stream, [&] { afterRan = true; }));
    CHECK_ERR(orEventQuery(event), orErrorNotReady);  // held back, and not started by the query
    CHECK(!beforeRan);
    CHECK_OK(orEventSynchronize(event));
    CHECK(beforeRan && before == data);
    std::this_thread::yield();
    CHECK(!afterRan && allPoison(after));
    CHECK_OK(orStreamSynchronize(stream));
    CHECK(afterRan && after == data);
  }
  CHECK_OK(orSetCompletionChecks(0));
  CHECK_OK(orEventDestroy(event));
  CHECK_OK(orStreamDestroy(stream));
  CHECK_OK(orFree(dev));
}

// Stream b waits for an event of stream a: reaching the wait requires a's
// work up to the record, and no more.
void testCheckedCrossStream() {
  const std::vector<unsigned char> data = pattern(kSize, 80);
  void* dev = nullptr;
  CHECK_OK(orMalloc(&dev, kSize));
  CHECK_OK(orMemcpy(dev, data.data(), kSize, orMemcpyHostToDevice));
  orStream_t a = nullptr, b = nullptr, c = nullptr;
  CHECK_OK(orStreamCreate(&a));
  CHECK_OK(orStreamCreate(&c));
  CHECK_OK(orSetDevice(1));  // across devices too
  CHECK_OK(orStreamCreate(&b));
  CHECK_OK(orSetDevice(0));
  orEvent_t event = nullptr;
  CHECK_OK(orEventCreate(&event));
  CHECK_OK(orSetCompletionChecks(1));
  for (int i = 0; i < kRepeats; ++i) {
    std::vector<unsigned char> out(kSize, 0);
    bool seen = false, laterOnA = false, onC = false;
    CHECK_OK(orMemcpyAsync(out.data(), dev, kSize, orMemcpyDeviceToHost, a));
    CHECK_OK(orEventRecord(event, a));
    CHECK_OK(launch(a, [&] { laterOnA = true; }));
    CHECK_OK(orStreamWaitEvent(b, event, 0));
    CHECK_OK(launch(b, [&] { seen = out == data; }));
    // A host function may itself need another stream's work.
    CHECK_OK(launch(c, [&] { onC = true; }));
    CHECK_OK(launch(b, [&] { CHECK_OK(orStreamSynchronize(c)); }));
    CHECK_OK(orStreamSynchronize(b));
    CHECK(seen && onC);
    CHECK(!laterOnA);
    CHECK_OK(orStreamSynchronize(a));
    CHECK(laterOnA);
  }
  CHECK_OK(orSetCompletionChecks(0));
  CHECK_OK(orEventDestroy(event));
  for (orStream_t stream : {a, b, c})
    CHECK_OK(orStreamDestroy(stream));
  CHECK_OK(orFree(dev));
}

// A host function runs when its stream is synchronized, not before.
void testCheckedHostFunction() {
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  CHECK_OK(orSetCompletionChecks(1));
  std::atomic<int> ran{0};
  CHECK_OK(launch(stream, [&ran] { ran.fetch_add(1); }));
  std::this_thread::sleep_for(20ms);
  CHECK(ran.load() == 0);
  CHECK_OK(orStreamSynchronize(stream));
  CHECK(ran.load() == 1);
  for (int i = 0; i < kRepeats; ++i) {
    CHECK_OK(launch(stream, [&ran] { ran.fetch_add(1); }));
    CHECK_OK(launch(nullptr, [&ran] { ran.fetch_add(1); }));
    std::this_thread::yield();
    CHECK(ran.load() == 1 + 2 * i);
    CHECK_OK(orStreamSynchronize(stream));
    CHECK(ran.load() == 2 + 2 * i);
    CHECK_OK(orStreamSynchronize(nullptr));
    CHECK(ran.load() == 3 + 2 * i);
  }
  // Destroying the stream runs what it holds.
  CHECK_OK(launch(stream, [&ran] { ran.fetch_add(1); }));
  CHECK_OK(orStreamDestroy(stream));
  CHECK(ran.load() == 2 + 2 * kRepeats);
  CHECK_OK(orSetCompletionChecks(0));
}

// orFree completes the held copies that touch the allocation before freeing it.
void testCheckedFree() {
  const size_t initial = freeBytes();
  orStream_t stream = nullptr;
  orEvent_t event = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  CHECK_OK(orEventCreate(&event));
  CHECK_OK(orSetCompletionChecks(1));
  for (int i = 0; i < kRepeats; ++i) {
    const std::vector<unsigned char> data = pattern(kSize, 90 + i);
    std::vector<unsigned char> out(kSize, 0);
    void* dev = nullptr;
    CHECK_OK(orMalloc(&dev, kSize));
    CHECK_OK(orMemcpyAsync(dev, data.data(), kSize, orMemcpyHostToDevice, stream));
    // Every other time from the default stream, which waits for `stream`.
    orStream_t reader = stream;
    if (i % 2 != 0) {
      reader = nullptr;
      CHECK_OK(orEventRecord(event, stream));
      CHECK_OK(orStreamWaitEvent(reader, event, 0));
    }
    CHECK_OK(orMemcpyAsync(out.data(), dev, kSize, orMemcpyDeviceToHost, reader));
    CHECK(allPoison(out));
    CHECK_OK(orFree(dev));
    CHECK(out == data);
  }
  CHECK(freeBytes() == initial);
  CHECK_OK(orSetCompletionChecks(0));
  CHECK_OK(orEventDestroy(event));
  CHECK_OK(orStreamDestroy(stream));
}

// Two threads submit to a shared stream and their own, and synchronize, at once.
void testCheckedThreads() {
  orStream_t shared = nullptr;
  CHECK_OK(orStreamCreate(&shared));
  CHECK_OK(orSetCompletionChecks(1));
  std::atomic<int> errors{0};
  const auto worker = [&](int id) {
    const auto expect = [&](bool ok) {
      if (!ok)
        errors.fetch_add(1);
    };
    orStream_t own = nullptr;
    orEvent_t event = nullptr;
    expect(orStreamCreate(&own) == orSuccess);
    expect(orEventCreate(&event) == orSuccess);
    void* dev = nullptr;
    expect(orMalloc(&dev, kSize) == orSuccess);
    for (int i = 0; i < kRepeats; ++i) {
      const std::vector<unsigned char> data = pattern(kSize, 100 + id * kRepeats + i);
      std::vector<unsigned char> out(kSize, 0);
      int calls = 0;
      expect(orMemcpyAsync(dev, data.data(), kSize, orMemcpyHostToDevice, shared) == orSuccess);
      expect(orEventRecord(event, shared) == orSuccess);
      expect(orStreamWaitEvent(own, event, 0) == orSuccess);
      expect(orMemcpyAsync(out.data(), dev, kSize, orMemcpyDeviceToHost, own) == orSuccess);
      expect(orLaunchHostFunc(own, [](void* count) { ++*static_cast<int*>(count); }, &calls) == orSuccess);
      switch (i % 3) {
        case 0:
          expect(orStreamSynchronize(own) == orSuccess);
          break;
        case 1:
          expect(orStreamQuery(own) == orErrorNotReady);  // held back
          expect(orStreamSynchronize(own) == orSuccess);
          break;
        default:
          expect(orStreamSynchronize(shared) == orSuccess);
          expect(orStreamSynchronize(own) == orSuccess);
      }
      expect(out == data && calls == 1);
    }
    expect(orEventDestroy(event) == orSuccess);
    expect(orStreamDestroy(own) == orSuccess);
    expect(orFree(dev) == orSuccess);
  };
  std::thread first(worker, 0), second(worker, 1);
  first.join();
  second.join();
  CHECK(errors.load() == 0);
  CHECK_OK(orSetCompletionChecks(0));
  CHECK_OK(orStreamDestroy(shared));
}

// Turning the mode off lets the held work run without a synchronization; with
// the mode off, nothing is held or poisoned.
void testCompletionChecksOff() {
  const std::vector<unsigned char> data = pattern(kSize, 110);
  void* dev = nullptr;
  CHECK_OK(orMalloc(&dev, kSize));
  CHECK_OK(orMemcpy(dev, data.data(), kSize, orMemcpyHostToDevice));
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  for (int i = 0; i < kRepeats; ++i) {
    CHECK_OK(orSetCompletionChecks(1));
    std::vector<unsigned char> out(kSize, 0);
    std::atomic<bool> ran{false};
    CHECK_OK(orMemcpyAsync(out.data(), dev, kSize, orMemcpyDeviceToHost, stream));
    CHECK_OK(launch(stream, [&ran] { ran = true; }));
    CHECK(!ran);
    CHECK_OK(orSetCompletionChecks(0));
    CHECK(eventually([&ran] { return ran.load(); }));
    CHECK(out == data);
    CHECK_OK(orStreamQuery(stream));
  }
  Gate gate;
  std::vector<unsigned char> out(kSize, 0);
  CHECK_OK(block(stream, gate));
  CHECK_OK(orMemcpyAsync(out.data(), dev, kSize, orMemcpyDeviceToHost, stream));
  CHECK(out == std::vector<unsigned char>(kSize, 0));
  CHECK_ERR(orStreamQuery(stream), orErrorNotReady);
  gate.open();
  CHECK_OK(orStreamSynchronize(stream));
  CHECK(out == data);
  CHECK_OK(orStreamDestroy(stream));
  CHECK_OK(orFree(dev));
}

}  // namespace openreg_test
