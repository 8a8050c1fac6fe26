// Streams: creation and priorities, destruction with queued work, queries,
// order, concurrency, the default stream, and many threads at once.
#include <climits>

#include "harness.h"

namespace openreg_test {

void testStreamBasics() {
  int least = 1, greatest = 1;
  CHECK_OK(orDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK(least == 0 && greatest == -2);
  CHECK_ERR(orDeviceGetStreamPriorityRange(nullptr, &greatest), orErrorInvalidValue);
  CHECK_ERR(orDeviceGetStreamPriorityRange(&least, nullptr), orErrorInvalidValue);

  orStream_t stream = nullptr;
  int device = -1, priority = 1;
  CHECK_ERR(orStreamCreate(nullptr), orErrorInvalidValue);
  CHECK_OK(orStreamCreate(&stream));
  CHECK(stream != nullptr);
  CHECK_OK(orStreamGetDevice(stream, &device));
  CHECK(device == 0);
  CHECK_OK(orStreamGetPriority(stream, &priority));
  CHECK(priority == 0);
  CHECK_ERR(orStreamGetDevice(stream, nullptr), orErrorInvalidValue);
  CHECK_ERR(orStreamGetPriority(stream, nullptr), orErrorInvalidValue);
  CHECK_ERR(orLaunchHostFunc(stream, nullptr, nullptr), orErrorInvalidValue);
  CHECK_MESSAGE_HAS("fn is NULL");
  CHECK_OK(orStreamQuery(stream));  // nothing submitted yet
  CHECK_OK(orStreamSynchronize(stream));
  CHECK_OK(orStreamDestroy(stream));

  // Out-of-range priorities clamp into [greatest, least]; flags 1 (non-blocking)
  // is accepted, anything but 0 and 1 is not.
  const std::pair<int, int> priorities[] = {{0, 0}, {-1, -1}, {-2, -2}, {-3, -2}, {1, 0}, {INT_MIN, -2}, {INT_MAX, 0}};
  for (const auto& [requested, expected] : priorities) {
    for (unsigned int flags : {0u, 1u}) {
      CHECK_OK(orStreamCreateWithPriority(&stream, flags, requested));
      CHECK_OK(orStreamGetPriority(stream, &priority));
      CHECK(priority == expected);
      CHECK_OK(orStreamDestroy(stream));
    }
  }
  CHECK_ERR(orStreamCreateWithPriority(&stream, 2, 0), orErrorInvalidValue);
  CHECK_MESSAGE_HAS("flags 0x2");
  CHECK_ERR(orStreamCreateWithPriority(&stream, 0x80000001u, -1), orErrorInvalidValue);
  CHECK_ERR(orStreamCreateWithPriority(nullptr, 0, 0), orErrorInvalidValue);

  // A stream belongs to the device current at its creation; its host
  // functions see that device as current.
  CHECK_OK(orSetDevice(1));
  CHECK_OK(orStreamCreate(&stream));
  CHECK_OK(orSetDevice(0));
  CHECK_OK(orStreamGetDevice(stream, &device));
  CHECK(device == 1);
  int seen = -1;
  CHECK_OK(orLaunchHostFunc(stream, [](void* out) { orGetDevice(static_cast<int*>(out)); }, &seen));
  CHECK_OK(orStreamSynchronize(stream));
  CHECK(seen == 1);
  CHECK_OK(orStreamDestroy(stream));

  // Streams start no thread until their first submission.
  const int threadsBefore = threadCount();
  std::vector<orStream_t> many(1000);
  for (orStream_t& each : many)
    CHECK_OK(orStreamCreate(&each));
  CHECK(threadCount() == threadsBefore);
  CHECK_OK(orLaunchHostFunc(many[0], [](void*) {}, nullptr));
  CHECK(threadCount() == threadsBefore + 1);
  for (orStream_t each : many)
    CHECK_OK(orStreamDestroy(each));
  CHECK(threadCountSettlesAt(threadsBefore));  // the worker is joined
}

void testStreamDestroy() {
  // Destroy waits for the queued work.
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  std::atomic<bool> done{false};
  CHECK_OK(launch(stream, [&done] {
    std::this_thread::sleep_for(30ms);
    done = true;
  }));
  CHECK_OK(orStreamDestroy(stream));
  CHECK(done);

  // A destroyed handle is reported by every call, naming it; never reused.
  const std::string name = handleText(stream);
  int value = 0;
  char host[8] = {};
  orEvent_t event = nullptr;
  CHECK_OK(orEventCreate(&event));
  CHECK_ERR(orStreamDestroy(stream), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS("orStreamDestroy: stream " + name + " is not a live stream");
  CHECK_ERR(orStreamQuery(stream), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS(name);
  CHECK_ERR(orStreamSynchronize(stream), orErrorInvalidResourceHandle);
  CHECK_ERR(orStreamGetDevice(stream, &value), orErrorInvalidResourceHandle);
  CHECK_ERR(orStreamGetPriority(stream, &value), orErrorInvalidResourceHandle);
  CHECK_ERR(orLaunchHostFunc(stream, [](void*) {}, nullptr), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS("orLaunchHostFunc");
  CHECK_ERR(orMemcpyAsync(host, host + 4, 4, orMemcpyHostToHost, stream), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS("orMemcpyAsync");
  CHECK_ERR(orEventRecord(event, stream), orErrorInvalidResourceHandle);
  CHECK_ERR(orStreamWaitEvent(stream, event, 0), orErrorInvalidResourceHandle);
  // Never created (not dereferenced).
  orStream_t bogus = reinterpret_cast<orStream_t>(&value);
  CHECK_ERR(orStreamQuery(bogus), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS(handleText(bogus));
  CHECK_ERR(orStreamDestroy(bogus), orErrorInvalidResourceHandle);
  // The default stream cannot be destroyed.
  CHECK_ERR(orStreamDestroy(nullptr), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS("default stream");
  orStream_t next = nullptr;
  CHECK_OK(orStreamCreate(&next));
  CHECK(next != stream);
  CHECK_ERR(orStreamQuery(stream), orErrorInvalidResourceHandle);
  CHECK_OK(orStreamDestroy(next));
  CHECK_OK(orEventDestroy(event));

  // Destroyed while another thread submits: every accepted task runs, and
  // submissions after the destruction fail cleanly.
  CHECK_OK(orStreamCreate(&stream));
  std::atomic<int> accepted{0}, ran{0};
  std::atomic<bool> started{false};
  std::thread submitter([&] {
    for (;;) {
      const orError_t error =
          orLaunchHostFunc(stream, [](void* counter) { static_cast<std::atomic<int>*>(counter)->fetch_add(1); }, &ran);
      if (error != orSuccess) {
        CHECK(error == orErrorInvalidResourceHandle);
        return;
      }
      accepted.fetch_add(1);
      started = true;
    }
  });
  while (!started)
    std::this_thread::yield();
  CHECK_OK(orStreamDestroy(stream));
  submitter.join();
  CHECK(accepted.load() > 0);
  CHECK(ran.load() == accepted.load());
}

void testStreamQuery() {
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  Gate gate;
  CHECK_OK(block(stream, gate));
  CHECK_ERR(orStreamQuery(stream), orErrorNotReady);
  CHECK_MESSAGE_HAS(handleText(stream));
  CHECK_ERR(orStreamQuery(stream), orErrorNotReady);
  gate.open();
  CHECK_OK(orStreamSynchronize(stream));
  CHECK_OK(orStreamQuery(stream));

  // Waiting for a 200 ms host function burns next to no CPU: no busy wait.
  orEvent_t event = nullptr;
  CHECK_OK(orEventCreate(&event));
  const auto sleepy = [] { std::this_thread::sleep_for(200ms); };
  const std::pair<const char*, std::function<orError_t()>> waits[] = {
      {"orStreamSynchronize", [stream] { return orStreamSynchronize(stream); }},
      {"orDeviceSynchronize", [] { return orDeviceSynchronize(); }},
      {"orEventSynchronize", [event] { return orEventSynchronize(event); }},
  };
  for (const auto& [name, wait] : waits) {
    CHECK_OK(launch(stream, sleepy));
    CHECK_OK(orEventRecord(event, stream));
    const double cpuStart = cpuMilliseconds();
    const Clock::time_point start = Clock::now();
    CHECK_OK(wait());
    const double cpu = cpuMilliseconds() - cpuStart;
    record(
        millisecondsSince(start) >= 150 && cpu < 50, std::string(name) + " sleeps", __FILE__, __LINE__,
        "cpu " + std::to_string(cpu) + " ms");
  }
  CHECK_OK(orEventDestroy(event));
  CHECK_OK(orStreamDestroy(stream));
}

void testStreamOrder() {
  constexpr int kFunctions = 1000;
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  std::vector<int> order;
  Gate gate;
  CHECK_OK(block(stream, gate));  // all are queued before any runs
  for (int i = 0; i < kFunctions; ++i) {
    CHECK_OK(launch(stream, [&order, i] { order.push_back(i); }));
  }
  gate.open();
  CHECK_OK(orStreamSynchronize(stream));
  bool inOrder = order.size() == kFunctions;
  for (int i = 0; inOrder && i < kFunctions; ++i)
    inOrder = order[i] == i;
  CHECK(inOrder);
  CHECK_OK(orStreamDestroy(stream));
}

// Each stream has its own worker: a host function on A can wait for one on B.
void testConcurrentStreams() {
  orStream_t a = nullptr, b = nullptr;
  CHECK_OK(orStreamCreate(&a));
  CHECK_OK(orStreamCreate(&b));
  Gate setByB;
  bool sawB = false;
  CHECK_OK(launch(a, [&] { sawB = setByB.wait(); }));
  CHECK_OK(launch(b, [&] { setByB.open(); }));
  CHECK_OK(orStreamSynchronize(a));
  CHECK(sawB);
  CHECK_OK(orStreamDestroy(a));
  CHECK_OK(orStreamDestroy(b));
}

void testDefaultStream() {
  int device = -1, priority = 1, seen = -1;
  CHECK_OK(orSetDevice(1));
  CHECK_OK(orStreamGetDevice(nullptr, &device));
  CHECK(device == 1);
  CHECK_OK(orStreamGetPriority(nullptr, &priority));
  CHECK(priority == 0);
  CHECK_OK(orLaunchHostFunc(nullptr, [](void* out) { orGetDevice(static_cast<int*>(out)); }, &seen));
  CHECK_OK(orStreamSynchronize(nullptr));
  CHECK(seen == 1);  // ran on device 1's default stream

  // Device 1's default stream is not device 0's.
  Gate gate;
  CHECK_OK(block(nullptr, gate));
  CHECK_ERR(orStreamQuery(nullptr), orErrorNotReady);
  CHECK_OK(orSetDevice(0));
  CHECK_OK(orStreamQuery(nullptr));
  CHECK_OK(orStreamGetDevice(nullptr, &device));
  CHECK(device == 0);
  std::atomic<bool> ran{false};
  CHECK_OK(launch(nullptr, [&ran] { ran = true; }));
  CHECK_OK(orStreamSynchronize(nullptr));
  CHECK_OK(orDeviceSynchronize());
  CHECK(ran);
  CHECK_OK(orSetDevice(1));
  gate.open();
  CHECK_OK(orDeviceSynchronize());
  CHECK_OK(orStreamQuery(nullptr));

  // orDeviceSynchronize waits for the default stream and every created one.
  orStream_t first = nullptr, second = nullptr;
  CHECK_OK(orStreamCreate(&first));
  CHECK_OK(orStreamCreate(&second));
  std::atomic<int> finished{0};
  for (orStream_t stream : {first, second, static_cast<orStream_t>(nullptr)}) {
    CHECK_OK(launch(stream, [&finished] {
      std::this_thread::sleep_for(20ms);
      finished.fetch_add(1);
    }));
  }
  CHECK_OK(orDeviceSynchronize());
  CHECK(finished.load() == 3);
  CHECK_OK(orStreamDestroy(first));
  CHECK_OK(orStreamDestroy(second));
  CHECK_OK(orSetDevice(0));
}

void testStreamStress() {
  constexpr int kThreads = 4, kIterations = 1000;
  constexpr size_t kChunk = 64, kSize = kChunk * kIterations;
  size_t initial[2];
  for (int device : {0, 1}) {
    CHECK_OK(orSetDevice(device));
    initial[device] = freeBytes();
  }
  CHECK_OK(orSetDevice(0));
  const int threadsBefore = threadCount();
  std::atomic<int> errors{0};
  const auto worker = [&](int id) {
    const auto expect = [&](bool ok) {
      if (!ok)
        errors.fetch_add(1);
    };
    expect(orSetDevice(id % 2) == orSuccess);
    orStream_t stream = nullptr;
    orEvent_t event = nullptr;
    expect(orStreamCreateWithPriority(&stream, id % 2, -id) == orSuccess);
    expect(orEventCreateWithFlags(&event, orEventDisableTiming) == orSuccess);
    const std::vector<unsigned char> source = pattern(kSize, 40 + id);
    std::vector<unsigned char> result(kSize, 0);
    void* a = nullptr;
    void* b = nullptr;
    expect(orMalloc(&a, kSize) == orSuccess);
    expect(orMalloc(&b, kSize) == orSuccess);
    int calls = 0;
    for (size_t i = 0; i < kIterations; ++i) {
      const size_t at = i * kChunk;
      expect(orMemcpyAsync(offset(a, at), source.data() + at, kChunk, orMemcpyHostToDevice, stream) == orSuccess);
      expect(orMemcpyAsync(offset(b, at), offset(a, at), kChunk, orMemcpyDeviceToDevice, stream) == orSuccess);
      expect(orMemcpyAsync(result.data() + at, offset(b, at), kChunk, orMemcpyDeviceToHost, stream) == orSuccess);
      expect(orLaunchHostFunc(stream, [](void* count) { ++*static_cast<int*>(count); }, &calls) == orSuccess);
      if (i % 100 == 0) {
        expect(orEventRecord(event, stream) == orSuccess);
        const orError_t query = orStreamQuery(stream);
        expect(query == orSuccess || query == orErrorNotReady);
      }
    }
    expect(orStreamSynchronize(stream) == orSuccess);
    expect(orEventQuery(event) == orSuccess);
    expect(calls == kIterations);
    expect(result == source);
    expect(orEventDestroy(event) == orSuccess);
    expect(orStreamDestroy(stream) == orSuccess);
    expect(orFree(a) == orSuccess);
    expect(orFree(b) == orSuccess);
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id)
    threads.emplace_back(worker, id);
  for (std::thread& thread : threads)
    thread.join();
  CHECK(errors.load() == 0);
  CHECK(threadCountSettlesAt(threadsBefore));  // every stream's worker was joined
  for (int device : {0, 1}) {
    CHECK_OK(orSetDevice(device));
    CHECK(freeBytes() == initial[device]);
    CHECK_OK(orStreamQuery(nullptr));
  }
  CHECK_OK(orSetDevice(0));
}

}  // namespace openreg_test
