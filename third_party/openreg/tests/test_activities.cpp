// CUPTI-like activity records (orActivity*): kernels, copies, ranges. Runs after
// the in-process tests, so the runtime has started in this process.
#include <cstdint>

#include "harness.h"

namespace openreg_test {
namespace {

struct Collected {
  orActivityKind kind;
  std::string name;
  int device;
  orStream_t stream;
  uint64_t correlationId;
  int64_t start, end;
  orMemcpyKind memcpyKind;
  size_t bytes;
};

std::vector<Collected> flushActivities() {
  std::vector<Collected> all;
  CHECK_OK(orActivityFlush(
      [](const orActivity* a, void* user) {
        static_cast<std::vector<Collected>*>(user)->push_back(
            {a->kind, a->name, a->device, a->stream, a->correlationId, a->start, a->end, a->memcpyKind, a->bytes});
      },
      &all));
  return all;
}

int64_t epochNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void testActivities() {
  constexpr size_t kSize = 3 * kPage + 7;
  std::vector<unsigned char> host(kSize, 1);
  void* dev = nullptr;
  CHECK_OK(orMalloc(&dev, kSize));
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));

  // Off: nothing is recorded, and the kernel bracket hands out no record.
  (void)flushActivities();
  orKernelActivity_t kernel = reinterpret_cast<orKernelActivity_t>(1);
  CHECK_OK(orKernelBegin(stream, "off", 3, &kernel));
  CHECK(kernel == nullptr);
  CHECK_OK(orKernelEnd(kernel));
  CHECK_OK(orMemcpy(dev, host.data(), kSize, orMemcpyHostToDevice));
  CHECK(flushActivities().empty());

  const int64_t before = epochNs();
  CHECK_OK(orActivityEnable());
  CHECK_OK(orActivityEnable());  // two consumers
  CHECK_OK(orActivityPushExternalCorrelationId(41));
  CHECK_OK(orActivityPushExternalCorrelationId(42));
  CHECK_OK(orRangePush(stream, "outer range"));
  CHECK_OK(orKernelBegin(stream, "aten::add.out_and_more", 12, &kernel));
  CHECK(kernel != nullptr);
  // A kernel's own synchronous copy is part of its record.
  CHECK_OK(orMemcpy(dev, host.data(), kSize, orMemcpyHostToDevice));
  CHECK_OK(orKernelEnd(kernel));
  CHECK_OK(orMemcpy(dev, host.data(), kSize, orMemcpyHostToDevice));
  // Queued behind a closed gate: runs (and is stamped) after the pops below,
  // yet keeps the correlation id of its launch.
  Gate gate;
  CHECK_OK(block(stream, gate));
  CHECK_OK(orMemcpyAsync(host.data(), dev, kSize, orMemcpyDeviceToHost, stream));
  std::atomic<int> ran{0};
  CHECK_OK(
      orLaunchHostFunc(stream, [](void* counter) { static_cast<std::atomic<int>*>(counter)->fetch_add(1); }, &ran));
  CHECK_OK(orRangePop());  // the stream reaches this pop after the gate
  uint64_t popped = 0;
  CHECK_OK(orActivityPopExternalCorrelationId(&popped));
  CHECK(popped == 42);
  CHECK_OK(orMemcpy(host.data(), dev, kSize, orMemcpyDeviceToHost));  // correlation 41
  CHECK_OK(orActivityPopExternalCorrelationId(nullptr));
  const int64_t gateOpened = epochNs();
  gate.open();
  CHECK_OK(orStreamSynchronize(stream));
  CHECK_OK(orActivityDisable());
  CHECK_OK(orActivityDisable());
  const int64_t after = epochNs();
  CHECK(ran.load() == 1);

  const std::vector<Collected> all = flushActivities();
  CHECK(all.size() == 7);  // block() is a host function too
  auto find = [&](orActivityKind kind, orMemcpyKind copy = orMemcpyHostToHost) {
    for (const Collected& a : all) {
      if (a.kind == kind && (kind != orActivityKindMemcpy || a.memcpyKind == copy))
        return a;
    }
    return Collected{};
  };
  for (const Collected& a : all) {
    CHECK(before <= a.start && a.start <= a.end && a.end <= after);
    CHECK(a.device == 0);
  }
  const Collected k = find(orActivityKindKernel);
  CHECK(k.name == "aten::add.ou");  // nameLength bytes
  CHECK(k.stream == stream && k.correlationId == 42 && k.bytes == 0);
  const Collected h2d = find(orActivityKindMemcpy, orMemcpyHostToDevice);
  CHECK(h2d.name == "Memcpy HtoD" && h2d.bytes == kSize && h2d.correlationId == 42);
  CHECK(h2d.stream == nullptr);  // synchronous copies: the default stream
  const Collected d2h = find(orActivityKindMemcpy, orMemcpyDeviceToHost);
  CHECK(d2h.name == "Memcpy DtoH" && d2h.stream == nullptr && d2h.correlationId == 41);
  int asyncCopies = 0;
  for (const Collected& a : all) {
    if (a.kind == orActivityKindMemcpy && a.stream == stream) {
      ++asyncCopies;
      CHECK(a.memcpyKind == orMemcpyDeviceToHost && a.correlationId == 42);
      CHECK(a.start >= gateOpened);
    }
  }
  CHECK(asyncCopies == 1);
  Collected fn{};  // the later of the two: the counter, behind the gate
  for (const Collected& a : all) {
    if (a.kind != orActivityKindHostFunc)
      continue;
    CHECK(a.name == "Host function" && a.stream == stream && a.correlationId == 42);
    if (a.start > fn.start)
      fn = a;
  }
  CHECK(fn.start >= gateOpened);
  const Collected range = find(orActivityKindRange);
  CHECK(range.name == "outer range" && range.stream == stream && range.correlationId == 0);
  // Opened while the stream was idle, closed when it reached the pop.
  CHECK(range.start <= k.start && range.end >= fn.end);
  CHECK(flushActivities().empty());  // forgotten once flushed

  // A range pushed while recording was off is not recorded, but still nests.
  CHECK_OK(orRangePush(nullptr, "unrecorded"));
  CHECK_OK(orActivityEnable());
  CHECK_OK(orRangePop());
  CHECK_OK(orActivityDisable());
  CHECK(flushActivities().empty());

  // Bad input.
  CHECK_ERR(orActivityDisable(), orErrorIllegalState);
  CHECK_MESSAGE_HAS("not enabled");
  CHECK_ERR(orActivityPopExternalCorrelationId(nullptr), orErrorIllegalState);
  CHECK_ERR(orRangePop(), orErrorIllegalState);
  CHECK_MESSAGE_HAS("no range is open");
  CHECK_ERR(orRangePush(nullptr, nullptr), orErrorInvalidValue);
  CHECK_ERR(orActivityFlush(nullptr, nullptr), orErrorInvalidValue);
  CHECK_ERR(orKernelBegin(stream, "k", 1, nullptr), orErrorInvalidValue);
  CHECK_OK(orActivityEnable());
  CHECK_ERR(orKernelBegin(reinterpret_cast<orStream_t>(999999), "k", 1, &kernel), orErrorInvalidResourceHandle);
  CHECK(kernel == nullptr);
  CHECK_OK(orActivityDisable());

  CHECK_OK(orStreamDestroy(stream));
  CHECK_OK(orFree(dev));
}

}  // namespace openreg_test
