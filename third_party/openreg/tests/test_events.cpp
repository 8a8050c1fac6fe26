// Events: records, queries, synchronization, elapsed time, and streams waiting
// on events.
#include "harness.h"

namespace openreg_test {

void testStreamWaitEvent() {
  orStream_t a = nullptr, b = nullptr, c = nullptr;
  CHECK_OK(orStreamCreate(&a));
  CHECK_OK(orStreamCreate(&c));
  CHECK_OK(orSetDevice(1));  // waits across devices are allowed
  CHECK_OK(orStreamCreate(&b));
  CHECK_OK(orSetDevice(0));
  orEvent_t event = nullptr;
  CHECK_OK(orEventCreate(&event));

  std::atomic<int> value{0};
  int seen = -1;
  CHECK_OK(launch(a, [&value] {
    std::this_thread::sleep_for(50ms);
    value = 42;
  }));
  CHECK_OK(orEventRecord(event, a));
  CHECK_OK(orStreamWaitEvent(b, event, 0));
  CHECK_OK(launch(b, [&] { seen = value; }));
  CHECK_OK(orStreamSynchronize(b));
  CHECK(seen == 42);
  CHECK_ERR(orStreamWaitEvent(b, event, 1), orErrorInvalidValue);
  CHECK_MESSAGE_HAS("flags 0x1");

  // A never-recorded event does not hold the stream back.
  orEvent_t unrecorded = nullptr;
  CHECK_OK(orEventCreate(&unrecorded));
  CHECK_OK(orStreamWaitEvent(b, unrecorded, 0));
  CHECK_OK(orStreamSynchronize(b));

  // The wait is for the record current at the call: re-recording the event
  // on an idle stream afterwards does not release b.
  Gate gate;
  CHECK_OK(block(a, gate));
  CHECK_OK(orEventRecord(event, a));
  CHECK_OK(orStreamWaitEvent(b, event, 0));
  std::atomic<bool> ranOnB{false};
  CHECK_OK(launch(b, [&ranOnB] { ranOnB = true; }));
  CHECK_OK(orEventRecord(event, c));
  CHECK_OK(orEventSynchronize(event));  // the latest record is c's
  std::this_thread::sleep_for(20ms);
  CHECK(!ranOnB);
  CHECK_ERR(orStreamQuery(b), orErrorNotReady);
  gate.open();
  CHECK_OK(orStreamSynchronize(b));
  CHECK(ranOnB);

  // A waiting stream's queued copies run after the event too.
  void* ptr = nullptr;
  CHECK_OK(orMalloc(&ptr, kPage));
  const std::vector<unsigned char> data = pattern(kPage, 31);
  std::vector<unsigned char> out(kPage, 0);
  CHECK_OK(launch(a, [] { std::this_thread::sleep_for(20ms); }));
  CHECK_OK(orMemcpyAsync(ptr, data.data(), kPage, orMemcpyHostToDevice, a));
  CHECK_OK(orEventRecord(event, a));
  CHECK_OK(orStreamWaitEvent(b, event, 0));
  CHECK_OK(orMemcpyAsync(out.data(), ptr, kPage, orMemcpyDeviceToHost, b));
  CHECK_OK(orStreamSynchronize(b));
  CHECK(out == data);
  CHECK_OK(orFree(ptr));

  CHECK_OK(orEventDestroy(event));
  CHECK_OK(orEventDestroy(unrecorded));
  for (orStream_t stream : {a, b, c})
    CHECK_OK(orStreamDestroy(stream));
}

void testEvents() {
  orEvent_t start = nullptr, end = nullptr, untimed = nullptr;
  float ms = 0;
  CHECK_ERR(orEventCreate(nullptr), orErrorInvalidValue);
  CHECK_ERR(orEventCreateWithFlags(nullptr, orEventDefault), orErrorInvalidValue);
  for (unsigned int flags : {1u, 3u, 4u, 0x100u}) {
    CHECK_ERR(orEventCreateWithFlags(&start, flags), orErrorInvalidValue);
    CHECK_MESSAGE_HAS("flags");
  }
  CHECK_OK(orEventCreate(&start));
  CHECK_OK(orEventCreateWithFlags(&end, orEventDefault));
  CHECK_OK(orEventCreateWithFlags(&untimed, orEventDisableTiming));
  CHECK(start != end && end != untimed);
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));

  // Never recorded: complete for queries, unusable for timing.
  CHECK_OK(orEventQuery(start));
  CHECK_OK(orEventSynchronize(start));
  CHECK_ERR(orEventElapsedTime(&ms, start, end), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS("start event " + handleText(start) + " has never been recorded");
  CHECK_ERR(orEventElapsedTime(nullptr, start, end), orErrorInvalidValue);

  // Timing around a 20 ms host function.
  CHECK_OK(orEventRecord(start, stream));
  CHECK_OK(launch(stream, [] { std::this_thread::sleep_for(20ms); }));
  CHECK_OK(orEventRecord(end, stream));
  CHECK_ERR(orEventElapsedTime(&ms, start, end), orErrorNotReady);
  CHECK_OK(orEventSynchronize(end));
  CHECK_OK(orEventQuery(end));
  CHECK_OK(orEventQuery(start));
  CHECK_OK(orEventElapsedTime(&ms, start, end));
  CHECK(ms >= 15 && ms < 1000);
  float backwards = 0;
  CHECK_OK(orEventElapsedTime(&backwards, end, start));
  CHECK(backwards == -ms);
  CHECK_OK(orEventElapsedTime(&ms, start, start));
  CHECK(ms == 0);

  // Recorded but pending: NotReady from Query and ElapsedTime.
  Gate gate;
  CHECK_OK(block(stream, gate));
  CHECK_OK(orEventRecord(end, stream));
  CHECK_ERR(orEventQuery(end), orErrorNotReady);
  CHECK_MESSAGE_HAS(handleText(end));
  CHECK_ERR(orEventElapsedTime(&ms, start, end), orErrorNotReady);
  CHECK_MESSAGE_HAS("end event " + handleText(end) + " has not completed");
  // Recording again replaces the pending record: on the default stream,
  // which is idle, it completes while `stream` is still blocked.
  CHECK_OK(orEventRecord(end, nullptr));
  CHECK_OK(orEventSynchronize(end));
  CHECK_OK(orEventQuery(end));
  CHECK_OK(orEventElapsedTime(&ms, start, end));
  CHECK(ms > 0);
  CHECK_ERR(orStreamQuery(stream), orErrorNotReady);
  gate.open();
  CHECK_OK(orStreamSynchronize(stream));

  // Timing disabled: completes like any event, but has no timestamp.
  CHECK_ERR(orEventElapsedTime(&ms, untimed, end), orErrorInvalidResourceHandle);
  CHECK_OK(orEventRecord(untimed, stream));
  CHECK_OK(orEventSynchronize(untimed));
  CHECK_OK(orEventQuery(untimed));
  CHECK_ERR(orEventElapsedTime(&ms, untimed, end), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS("orEventDisableTiming");
  CHECK_ERR(orEventElapsedTime(&ms, start, untimed), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS("end event " + handleText(untimed));

  // An event destroyed while its record is queued: the marker still runs.
  orEvent_t doomed = nullptr;
  CHECK_OK(orEventCreate(&doomed));
  Gate second;
  CHECK_OK(block(stream, second));
  CHECK_OK(orEventRecord(doomed, stream));
  CHECK_OK(orStreamWaitEvent(nullptr, doomed, 0));  // the default stream waits for it too
  CHECK_OK(orEventDestroy(doomed));
  second.open();
  CHECK_OK(orStreamSynchronize(stream));
  CHECK_OK(orStreamSynchronize(nullptr));

  // Stale and bogus handles.
  const std::string name = handleText(doomed);
  CHECK_ERR(orEventDestroy(doomed), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS("orEventDestroy: event " + name);
  CHECK_ERR(orEventQuery(doomed), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS(name);
  CHECK_ERR(orEventSynchronize(doomed), orErrorInvalidResourceHandle);
  CHECK_ERR(orEventRecord(doomed, stream), orErrorInvalidResourceHandle);
  CHECK_ERR(orEventElapsedTime(&ms, start, doomed), orErrorInvalidResourceHandle);
  CHECK_ERR(orStreamWaitEvent(stream, doomed, 0), orErrorInvalidResourceHandle);
  CHECK_ERR(orEventQuery(nullptr), orErrorInvalidResourceHandle);
  int local = 0;
  CHECK_ERR(orEventDestroy(reinterpret_cast<orEvent_t>(&local)), orErrorInvalidResourceHandle);
  CHECK_OK(orStreamQuery(stream));

  // Events last recorded on different devices: their clocks are unrelated.
  orEvent_t other = nullptr;
  CHECK_OK(orEventCreate(&other));
  CHECK_OK(orSetDevice(1));
  CHECK_OK(orEventRecord(other, nullptr));  // device 1's default stream
  CHECK_OK(orEventSynchronize(other));
  CHECK_OK(orSetDevice(0));
  CHECK_ERR(orEventElapsedTime(&ms, start, other), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS(
      "start event " + handleText(start) + " was recorded on device 0 and the end event " + handleText(other) +
      " on device 1");
  CHECK_ERR(orEventElapsedTime(&ms, other, start), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS("recorded on device 1 and the end event");
  CHECK_OK(orEventRecord(other, stream));  // recorded again, on device 0
  CHECK_OK(orEventSynchronize(other));
  CHECK_OK(orEventElapsedTime(&ms, start, other));

  for (orEvent_t event : {start, end, untimed, other})
    CHECK_OK(orEventDestroy(event));
  CHECK_OK(orStreamDestroy(stream));
}

}  // namespace openreg_test
