// Copies and scoped accesses find allocations without a lock (ReadSection.h)
// while other threads allocate and free: orFree never frees memory in use,
// and nothing accepts a pointer once orFree has returned.
#include <algorithm>
#include <array>

#include "harness.h"

namespace openreg_test {

namespace {

constexpr uint64_t kGenerations = 400;

// What the threads of testFreeRacesWithReaders share. Generation g's page is
// gens[g]; its first 8 bytes hold g once written.
struct Race {
  std::array<std::atomic<void*>, kGenerations + 1> gens{};
  std::atomic<uint64_t> current{0};  // the generation racers aim at
  std::atomic<uint64_t> picked{0};  // the last generation a racer aimed at
  std::atomic<uint64_t> freed{0};  // the last generation orFree returned for
  std::atomic<uint64_t> checked{0};  // the last freed generation the checker tried
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::atomic<uint64_t> refusals{0};  // orFree refused: a racer held an access
  std::atomic<uint64_t> readerHits{0};

  void expect(bool ok, const char* what, uint64_t generation) {
    if (ok)
      return;
    if (errors.fetch_add(1) < 5) {
      std::fprintf(
          stderr, "FAIL generation %llu: %s (%s)\n", static_cast<unsigned long long>(generation), what,
          orGetLastErrorMessage());
    }
  }

  // Waits until flag reaches value; false after 10 s (a hang is a failure).
  static bool waitFor(const std::atomic<uint64_t>& flag, uint64_t value) {
    const auto deadline = Clock::now() + 10s;
    while (flag.load() < value) {
      if (Clock::now() > deadline)
        return false;
      std::this_thread::yield();
    }
    return true;
  }
};

// Allocates a page per generation, lets the racers at it, frees it (retrying
// while a racer holds an access) and waits for the checker.
void freer(Race& race) {
  for (uint64_t g = 1; g <= kGenerations; ++g) {
    void* ptr = nullptr;
    race.expect(orMalloc(&ptr, kPage) == orSuccess, "orMalloc", g);
    race.expect(orMemcpy(ptr, &g, sizeof g, orMemcpyHostToDevice) == orSuccess, "write", g);
    race.gens[g].store(ptr);
    race.current.store(g);
    // Frees as a racer goes for the page, so that the two meet.
    race.expect(Race::waitFor(race.picked, g), "no racer came", g);
    orError_t error;
    while ((error = orFree(ptr)) == orErrorIllegalState) {
      race.refusals.fetch_add(1);
      std::this_thread::yield();
    }
    race.expect(error == orSuccess, "orFree", g);
    race.freed.store(g);
    race.expect(Race::waitFor(race.checked, g), "checker did not answer", g);
  }
  race.done.store(true);
}

// Once orFree has returned, every entry point refuses the pointer (no other
// thread allocates on device 0 until the check is done, so the address is
// not reused meanwhile).
void checker(Race& race) {
  for (uint64_t g = 1; g <= kGenerations; ++g) {
    if (!Race::waitFor(race.freed, g)) {
      race.expect(false, "freer did not free", g);
      return;
    }
    void* ptr = race.gens[g].load();
    uint64_t value = 0;
    race.expect(
        orMemcpy(&value, ptr, sizeof value, orMemcpyDeviceToHost) == orErrorInvalidDevicePointer,
        "orMemcpy accepted a freed pointer", g);
    void* view = nullptr;
    race.expect(
        orMemAccessBegin(ptr, sizeof value, &view) == orErrorInvalidDevicePointer,
        "orMemAccessBegin accepted a freed pointer", g);
    race.expect(std::strstr(orGetLastErrorMessage(), "not inside a live allocation") != nullptr, "message", g);
    orPointerAttributes attributes{};
    race.expect(
        orPointerGetAttributes(&attributes, ptr) == orErrorInvalidDevicePointer,
        "orPointerGetAttributes accepted a freed pointer", g);
    race.checked.store(g);
  }
}

// Reads each generation's page once through a copy and a scoped access
// (bounded, so that the freer's retries end).
// Each call either fails because the page was freed, or sees the generation
// written there (a later one if the address was reused; 0 before the write),
// and an open access keeps the page from being freed or reused.
void racer(Race& race) {
  uint64_t calls = 0, last = 0;
  while (!race.done.load()) {
    const uint64_t g = race.current.load();
    if (g == last) {
      std::this_thread::yield();
      continue;
    }
    last = g;
    void* ptr = race.gens[g].load();
    race.picked.store(g);
    const auto plausible = [g](uint64_t value) { return value == 0 || value >= g; };
    uint64_t value = 0;
    const orError_t copied = orMemcpy(&value, ptr, sizeof value, orMemcpyDeviceToHost);
    race.expect(copied == orSuccess || copied == orErrorInvalidDevicePointer, "orMemcpy error", g);
    if (copied == orSuccess)
      race.expect(plausible(value), "orMemcpy read stale data", g);

    void* view = nullptr;
    const void* batch[2] = {ptr, offset(ptr, 64)};
    const size_t sizes[2] = {sizeof value, sizeof value};
    void* views[2] = {};
    const bool batched = ++calls % 2 == 0;
    const orError_t begun =
        batched ? orMemAccessBeginBatch(2, batch, sizes, views) : orMemAccessBegin(ptr, sizeof value, &view);
    race.expect(begun == orSuccess || begun == orErrorInvalidDevicePointer, "begin error", g);
    if (begun != orSuccess)
      continue;
    race.readerHits.fetch_add(1);
    if (batched)
      view = views[0];
    const uint64_t first = *static_cast<volatile uint64_t*>(view);
    std::this_thread::yield();  // an orFree now must be refused
    const uint64_t second = *static_cast<volatile uint64_t*>(view);
    race.expect(plausible(first), "access read stale data", g);
    race.expect(first == second || first == 0, "page changed under an open access", g);
    const orError_t ended = batched ? orMemAccessEndBatch(2, batch) : orMemAccessEnd(ptr);
    race.expect(ended == orSuccess, "end", g);
  }
}

// Republishes device 1's table and waits for readers, from threads that come
// and go (their reader slots are reused), with copies in flight.
void churner(Race& race) {
  std::vector<unsigned char> host(64 * KiB);
  while (!race.done.load()) {
    std::thread shortLived([&] {
      orSetDevice(1);
      void* ptrs[4] = {};
      for (size_t i = 0; i < 4; ++i) {
        race.expect(orMalloc(&ptrs[i], (i + 1) * 16 * KiB) == orSuccess, "churn orMalloc", 0);
      }
      for (size_t i = 1; i < 4; ++i) {
        race.expect(orMemcpy(ptrs[i], ptrs[i - 1], 16 * KiB, orMemcpyDeviceToDevice) == orSuccess, "churn copy", 0);
      }
      race.expect(
          orMemcpyAsync(host.data(), ptrs[3], host.size(), orMemcpyDeviceToHost, nullptr) == orSuccess,
          "churn async copy", 0);
      for (void* ptr : ptrs)
        race.expect(orFree(ptr) == orSuccess, "churn orFree", 0);
    });
    shortLived.join();
  }
}

}  // namespace

void testFreeRacesWithReaders() {
  Race race;
  std::vector<std::thread> threads;
  threads.emplace_back(freer, std::ref(race));
  threads.emplace_back(checker, std::ref(race));
  threads.emplace_back(racer, std::ref(race));
  threads.emplace_back(racer, std::ref(race));
  threads.emplace_back(churner, std::ref(race));
  for (std::thread& thread : threads)
    thread.join();
  CHECK(race.errors.load() == 0);
  CHECK(race.checked.load() == kGenerations);
  // The race was run: racers got in, and orFree met an open access.
  CHECK(race.readerHits.load() > 0);
  std::printf(
      "  %llu accesses won the race, %llu orFree refusals\n", static_cast<unsigned long long>(race.readerHits.load()),
      static_cast<unsigned long long>(race.refusals.load()));
  size_t free = 0, total = 0;
  CHECK_OK(orMemGetInfo(&free, &total));
  CHECK(free == total);
}

// The same race in a fresh process, whose first read section starts the
// membarrier registration (ReadSection.cpp): the registration takes
// milliseconds, so the race begins with readers fencing themselves and goes
// on after writers take the fence over.
void testFreeRacesWhileFencesSwitch() {
  CHECK_CHILD_EXITED_CLEANLY(runInChild({}, testFreeRacesWithReaders));
}

// The count of open accesses is exact under concurrent begins and ends: while
// this thread holds an access to `second`, others open and close accesses on
// `first` alone, in batches of one run within `first` (counted in one update)
// and in batches that span both, and another keeps trying to free `second`,
// which must be refused every time; at the end no access is left open.
void testAccessCountUnderContention() {
  void* first = nullptr;
  void* second = nullptr;
  CHECK_OK(orMalloc(&first, kPage));
  CHECK_OK(orMalloc(&second, kPage));
  void* held = nullptr;
  CHECK_OK(orMemAccessBegin(second, 8, &held));
  constexpr int kThreads = 3;
  constexpr int kRounds = 20000;
  std::atomic<int> errors{0};
  std::atomic<bool> stop{false};
  // The free is refused while `second` is open, before and during the
  // workers' traffic: the workers start after its first refusal, so a loaded
  // machine that schedules the workers first cannot leave it untried.
  std::atomic<int> refusals{0};
  std::thread freeing([&] {
    while (!stop.load()) {
      if (orFree(second) != orErrorIllegalState) {
        errors.fetch_add(1);
        return;
      }
      refusals.fetch_add(1);
    }
  });
  while (refusals.load() == 0 && errors.load() == 0)
    std::this_thread::yield();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const void* batch[3] = {first, second, offset(first, 8)};
      const void* oneRun[2] = {first, offset(first, 8)};
      const size_t sizes[3] = {8, 8, 8};
      void* views[3];
      for (int i = 0; i < kRounds; ++i) {
        const int kind = (i + t) % 3;  // alone, one run, two allocations
        if ((kind == 0       ? orMemAccessBegin(first, 8, views)
                 : kind == 1 ? orMemAccessBeginBatch(2, oneRun, sizes, views)
                             : orMemAccessBeginBatch(3, batch, sizes, views)) != orSuccess) {
          errors.fetch_add(1);
        }
        if ((kind == 0       ? orMemAccessEnd(first)
                 : kind == 1 ? orMemAccessEndBatch(2, oneRun)
                             : orMemAccessEndBatch(3, batch)) != orSuccess) {
          errors.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  stop.store(true);
  freeing.join();
  CHECK(errors.load() == 0);
  CHECK(refusals.load() > 0);
  CHECK_OK(orMemAccessEnd(second));
  CHECK_ERR(orMemAccessEnd(second), orErrorIllegalState);
  CHECK_MESSAGE_HAS("has no open host access");
  CHECK_ERR(orMemAccessEnd(first), orErrorIllegalState);
  CHECK_OK(orFree(first));
  CHECK_OK(orFree(second));
}

}  // namespace openreg_test
