// Self-contained tests of the openreg runtime through its public C API.
//
// The configuration is read once per process, so every test that needs a
// particular environment runs in a forked child that sets it before its first
// API call. Those children are forked before the parent calls the API at all
// (see main); checks made in a child count in the shared counters below.

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <latch>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "openreg.h"

namespace {

// ---------------------------------------------------------------- harness

struct Counters {
  std::atomic<int> passed;
  std::atomic<int> failed;
};

// In MAP_SHARED memory so that forked children count too.
Counters* counters;

void record(bool ok, const std::string& expression, const char* file, int line,
            const std::string& detail) {
  if (ok) {
    counters->passed.fetch_add(1);
    return;
  }
  counters->failed.fetch_add(1);
  std::fprintf(stderr, "FAIL %s:%d: %s%s%s\n", file, line, expression.c_str(),
               detail.empty() ? "" : ": ", detail.c_str());
}

std::string errorDetail(orError_t got) {
  return std::string("got ") + orGetErrorName(got) + " (" + orGetLastErrorMessage() + ")";
}

#define CHECK(condition) record((condition), #condition, __FILE__, __LINE__, "")

#define CHECK_ERR(expression, expected)                                                     \
  do {                                                                                      \
    const orError_t got_ = (expression);                                                    \
    record(got_ == (expected), #expression " == " #expected, __FILE__, __LINE__,            \
           got_ == (expected) ? "" : errorDetail(got_));                                    \
  } while (0)

#define CHECK_OK(expression) CHECK_ERR(expression, orSuccess)

// The last error message of this thread contains text.
#define CHECK_MESSAGE_HAS(text)                                                              \
  record(std::strstr(orGetLastErrorMessage(), (text)) != nullptr,                            \
         "last error message contains \"" + std::string(text) + "\"", __FILE__, __LINE__,    \
         std::string("message is \"") + orGetLastErrorMessage() + "\"")

const char* const kEnvironment[] = {"OPENREG_DEVICE_COUNT", "OPENREG_DEVICE_MEMORY",
                                    "OPENREG_MEMORY_PROTECTION"};

using Environment = std::vector<std::pair<const char*, const char*>>;

// Runs body in a forked child with the OPENREG_* variables replaced by env;
// returns the child's wait status.
int runInChild(const Environment& env, const std::function<void()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    for (const char* name : kEnvironment) unsetenv(name);
    for (const auto& [name, value] : env) setenv(name, value, 1);
    body();
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

#define CHECK_CHILD_EXITED_CLEANLY(status) \
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0)

size_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

constexpr size_t kPage = 4096;
constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;
constexpr size_t GiB = 1024 * MiB;

size_t freeBytes() {
  size_t free = 0, total = 0;
  orMemGetInfo(&free, &total);
  return free;
}

std::vector<unsigned char> pattern(size_t size, unsigned seed) {
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(i * 131 + seed * 7 + 1);
  return bytes;
}

std::vector<unsigned char> readBack(const void* devPtr, size_t size) {
  std::vector<unsigned char> bytes(size);
  CHECK_OK(orMemcpy(bytes.data(), devPtr, size, orMemcpyDeviceToHost));
  return bytes;
}

char* offset(void* ptr, size_t bytes) { return static_cast<char*>(ptr) + bytes; }

// ------------------------------------------------- environment (children)

void testDefaultEnvironment() {
  CHECK_CHILD_EXITED_CLEANLY(runInChild({}, [] {
    int count = 0;
    CHECK_OK(orGetDeviceCount(&count));
    CHECK(count == 2);
    size_t free = 0, total = 0;
    CHECK_OK(orMemGetInfo(&free, &total));
    CHECK(total == 8 * GiB);
    CHECK(free == total);
    int initialized = -1;
    CHECK_OK(orDeviceIsInitialized(0, &initialized));
    CHECK(initialized == 0);  // getting the count and info creates no arena
  }));
}

void testValidEnvironment() {
  const std::pair<const char*, int> counts[] = {{"1", 1}, {"2", 2}, {"16", 16}};
  for (const auto& [text, expected] : counts) {
    CHECK_CHILD_EXITED_CLEANLY(runInChild({{"OPENREG_DEVICE_COUNT", text}}, [expected] {
      int count = 0;
      CHECK_OK(orGetDeviceCount(&count));
      CHECK(count == expected);
      CHECK_OK(orSetDevice(expected - 1));
      CHECK_ERR(orSetDevice(expected), orErrorInvalidDevice);
    }));
  }
  const std::pair<const char*, size_t> sizes[] = {
      {"4096", 4096},     {"5000", 8192},      {"64K", 64 * KiB}, {"64k", 64 * KiB},
      {"3m", 3 * MiB},    {"1G", GiB},         {"2g", 2 * GiB}};
  for (const auto& [text, expected] : sizes) {
    CHECK_CHILD_EXITED_CLEANLY(runInChild({{"OPENREG_DEVICE_MEMORY", text}}, [expected] {
      size_t free = 0, total = 0;
      CHECK_OK(orMemGetInfo(&free, &total));
      CHECK(total == expected);
      void* ptr = nullptr;
      CHECK_OK(orMalloc(&ptr, expected));  // the whole capacity is usable
      CHECK_OK(orFree(ptr));
    }));
  }
}

// Every entry point fails with orErrorInitializationError and a message that
// names the variable, its value and what is valid.
void checkEverythingFails(const std::string& name, const std::string& value,
                          const char* validRange) {
  int number = 0;
  size_t size = 0;
  void* ptr = nullptr;
  char host[16] = {};
  orPointerAttributes attributes{};
  CHECK_ERR(orGetDeviceCount(&number), orErrorInitializationError);
  CHECK_MESSAGE_HAS(name.c_str());
  CHECK_MESSAGE_HAS(("'" + value + "'").c_str());
  CHECK_MESSAGE_HAS(validRange);
  CHECK_ERR(orSetDevice(0), orErrorInitializationError);
  CHECK_ERR(orGetDevice(&number), orErrorInitializationError);
  CHECK_ERR(orDeviceSynchronize(), orErrorInitializationError);
  CHECK_ERR(orDeviceIsInitialized(0, &number), orErrorInitializationError);
  CHECK_ERR(orMalloc(&ptr, 1), orErrorInitializationError);
  CHECK_ERR(orFree(nullptr), orErrorInitializationError);
  CHECK_ERR(orMemGetInfo(&size, &size), orErrorInitializationError);
  CHECK_ERR(orMallocHost(&ptr, 1), orErrorInitializationError);
  CHECK_ERR(orFreeHost(nullptr), orErrorInitializationError);
  CHECK_ERR(orMemcpy(host, host + 8, 8, orMemcpyHostToHost), orErrorInitializationError);
  CHECK_ERR(orPointerGetAttributes(&attributes, host), orErrorInitializationError);
  CHECK_ERR(orMemAccessBegin(host, 1, &ptr), orErrorInitializationError);
  CHECK_ERR(orMemAccessEnd(host), orErrorInitializationError);
  CHECK_MESSAGE_HAS(name.c_str());
  CHECK(std::strcmp(orGetErrorName(orErrorInitializationError), "orErrorInitializationError") == 0);
}

void testInvalidEnvironment() {
  struct Case {
    const char* name;
    std::vector<const char*> values;
    const char* validRange;
  };
  const Case cases[] = {
      {"OPENREG_DEVICE_COUNT", {"0", "17", "abc", "", "-1", " 2", "2x", "99999999999999999999"},
       "1..16"},
      {"OPENREG_DEVICE_MEMORY",
       {"1K", "0", "4095", "abc", "", "12X", "G", "1.5G", "-4096", "99999999999G", "8 G"},
       "at least 4096"},
      {"OPENREG_MEMORY_PROTECTION", {"2", "", "on", "00", "true"}, "0 (off) or 1 (on)"},
  };
  for (const Case& c : cases) {
    for (const char* value : c.values) {
      const std::string name = c.name, text = value;
      const char* validRange = c.validRange;
      CHECK_CHILD_EXITED_CLEANLY(runInChild({{c.name, value}}, [&] {
        checkEverythingFails(name, text, validRange);
      }));
    }
  }
}

// ------------------------------------------------ small arenas (children)

void testOutOfMemory() {
  CHECK_CHILD_EXITED_CLEANLY(runInChild({{"OPENREG_DEVICE_MEMORY", "64K"}}, [] {
    void* ptr = nullptr;
    CHECK_ERR(orMalloc(&ptr, 128 * KiB), orErrorMemoryAllocation);
    CHECK_MESSAGE_HAS("device 0");
    CHECK_MESSAGE_HAS("requested 131072 bytes");
    CHECK_MESSAGE_HAS("capacity 65536 bytes");
    CHECK_MESSAGE_HAS("0 bytes in use");
    CHECK_ERR(orMalloc(&ptr, SIZE_MAX), orErrorMemoryAllocation);
    CHECK_ERR(orMalloc(&ptr, SIZE_MAX - kPage + 2), orErrorMemoryAllocation);

    void* whole = nullptr;
    CHECK_OK(orMalloc(&whole, 64 * KiB));
    CHECK(freeBytes() == 0);
    CHECK_ERR(orMalloc(&ptr, 1), orErrorMemoryAllocation);
    CHECK_MESSAGE_HAS("requested 1 bytes");
    CHECK_MESSAGE_HAS("65536 bytes in use");

    // The other device has its own capacity.
    CHECK_OK(orSetDevice(1));
    void* other = nullptr;
    CHECK_OK(orMalloc(&other, 64 * KiB));
    CHECK_OK(orFree(other));
    CHECK_OK(orSetDevice(0));

    // The runtime keeps working after the failures.
    const std::vector<unsigned char> data = pattern(64 * KiB, 3);
    CHECK_OK(orMemcpy(whole, data.data(), data.size(), orMemcpyHostToDevice));
    CHECK(readBack(whole, data.size()) == data);
    CHECK_OK(orFree(whole));
    CHECK(freeBytes() == 64 * KiB);

    // Fragmentation: 32K free in 4K pieces cannot hold 8K.
    std::vector<void*> pages(16);
    for (void*& page : pages) CHECK_OK(orMalloc(&page, kPage));
    for (size_t i = 0; i < pages.size(); i += 2) CHECK_OK(orFree(pages[i]));
    CHECK(freeBytes() == 32 * KiB);
    CHECK_ERR(orMalloc(&ptr, 2 * kPage), orErrorMemoryAllocation);
    CHECK_MESSAGE_HAS("32768 bytes free");
    CHECK_MESSAGE_HAS("largest free range 4096 bytes");
    for (size_t i = 1; i < pages.size(); i += 2) CHECK_OK(orFree(pages[i]));
    CHECK_OK(orMalloc(&whole, 64 * KiB));
    CHECK_OK(orFree(whole));
  }));
}

void testCoalescing() {
  CHECK_CHILD_EXITED_CLEANLY(runInChild({{"OPENREG_DEVICE_MEMORY", "64K"}}, [] {
    // Three adjacent 16K blocks freed in orders that merge with the left
    // neighbour, the right one, or both at once; the fourth stays allocated.
    const std::vector<std::vector<int>> orders = {{1, 0, 2}, {0, 2, 1}, {2, 1, 0}};
    for (const std::vector<int>& order : orders) {
      void* blocks[4] = {};
      for (void*& block : blocks) CHECK_OK(orMalloc(&block, 16 * KiB));
      CHECK(freeBytes() == 0);
      for (int i : order) CHECK_OK(orFree(blocks[i]));
      void* joined = nullptr;
      CHECK_OK(orMalloc(&joined, 48 * KiB));
      CHECK(joined == blocks[0] || joined == blocks[1]);
      orPointerAttributes attributes{};
      CHECK_OK(orPointerGetAttributes(&attributes, offset(joined, 40 * KiB)));
      CHECK(attributes.basePointer == joined && attributes.allocationSize == 48 * KiB);
      CHECK_OK(orFree(joined));
      CHECK_OK(orFree(blocks[3]));
      CHECK(freeBytes() == 64 * KiB);
    }
  }));
}

// --------------------------------------------- memory protection (children)

void testMemoryProtection() {
  const auto readDirectly = [] {
    rlimit noCore{0, 0};
    setrlimit(RLIMIT_CORE, &noCore);
    void* ptr = nullptr;
    CHECK_OK(orMalloc(&ptr, kPage));
    const unsigned char value = 42;
    CHECK_OK(orMemcpy(ptr, &value, 1, orMemcpyHostToDevice));
    std::fflush(stdout);
    std::fflush(stderr);
    const unsigned char read = *static_cast<volatile unsigned char*>(ptr);
    _exit(read == 42 ? 42 : 1);
  };
  for (const Environment& env : {Environment{}, Environment{{"OPENREG_MEMORY_PROTECTION", "1"}}}) {
    const int status = runInChild(env, readDirectly);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
  }
  const int status = runInChild({{"OPENREG_MEMORY_PROTECTION", "0"}}, readDirectly);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42);

  // Unprotected, host writes through device pointers are seen by copies.
  CHECK_CHILD_EXITED_CLEANLY(runInChild({{"OPENREG_MEMORY_PROTECTION", "0"}}, [] {
    void* ptr = nullptr;
    CHECK_OK(orMalloc(&ptr, kPage));
    std::memset(ptr, 7, kPage);
    CHECK(readBack(ptr, kPage) == std::vector<unsigned char>(kPage, 7));
    CHECK_OK(orFree(ptr));
  }));
}

// ---------------------------------------------------- in-process tests

void testErrorStrings() {
  CHECK(std::strcmp(orGetLastErrorMessage(), "") == 0);
  const std::pair<orError_t, const char*> names[] = {
      {orSuccess, "orSuccess"},
      {orErrorInvalidValue, "orErrorInvalidValue"},
      {orErrorMemoryAllocation, "orErrorMemoryAllocation"},
      {orErrorInitializationError, "orErrorInitializationError"},
      {orErrorInvalidDevice, "orErrorInvalidDevice"},
      {orErrorInvalidDevicePointer, "orErrorInvalidDevicePointer"},
      {orErrorInvalidMemcpyDirection, "orErrorInvalidMemcpyDirection"},
      {orErrorIllegalState, "orErrorIllegalState"},
  };
  std::vector<std::string> strings;
  for (const auto& [code, name] : names) {
    CHECK(std::strcmp(orGetErrorName(code), name) == 0);
    const std::string text = orGetErrorString(code);
    CHECK(!text.empty() && text != "unrecognized error code");
    for (const std::string& earlier : strings) CHECK(text != earlier);
    strings.push_back(text);
  }
  CHECK(std::strcmp(orGetErrorString(static_cast<orError_t>(99)), "unrecognized error code") == 0);
  CHECK(std::strcmp(orGetErrorName(static_cast<orError_t>(-1)), "unrecognized error code") == 0);

  // The last error message is per thread and survives later successes.
  CHECK_ERR(orSetDevice(7), orErrorInvalidDevice);
  int count = 0;
  CHECK_OK(orGetDeviceCount(&count));
  CHECK_MESSAGE_HAS("invalid device 7");
  std::thread([] {
    CHECK(std::strcmp(orGetLastErrorMessage(), "") == 0);
    CHECK_ERR(orGetDevice(nullptr), orErrorInvalidValue);
  }).join();
  CHECK_MESSAGE_HAS("invalid device 7");
}

void testDevices() {
  int count = 0, current = -1, initialized = -1;
  CHECK_OK(orGetDeviceCount(&count));
  CHECK(count == 2);
  CHECK_ERR(orGetDeviceCount(nullptr), orErrorInvalidValue);
  CHECK_ERR(orGetDevice(nullptr), orErrorInvalidValue);
  CHECK_OK(orGetDevice(&current));
  CHECK(current == 0);

  for (int device : {0, 1}) {
    CHECK_OK(orDeviceIsInitialized(device, &initialized));
    CHECK(initialized == 0);
  }
  CHECK_ERR(orDeviceIsInitialized(2, &initialized), orErrorInvalidDevice);
  CHECK_ERR(orDeviceIsInitialized(0, nullptr), orErrorInvalidValue);
  void* ptr = nullptr;
  CHECK_OK(orMalloc(&ptr, 0));  // no arena for an empty allocation
  CHECK_OK(orDeviceIsInitialized(0, &initialized));
  CHECK(initialized == 0);
  CHECK_OK(orMalloc(&ptr, 1));
  CHECK_OK(orDeviceIsInitialized(0, &initialized));
  CHECK(initialized == 1);
  CHECK_OK(orDeviceIsInitialized(1, &initialized));
  CHECK(initialized == 0);
  CHECK_OK(orFree(ptr));

  CHECK_ERR(orSetDevice(-1), orErrorInvalidDevice);
  CHECK_MESSAGE_HAS("invalid device -1");
  CHECK_MESSAGE_HAS("device count is 2");
  CHECK_ERR(orSetDevice(2), orErrorInvalidDevice);
  CHECK_OK(orGetDevice(&current));
  CHECK(current == 0);  // a failed set changes nothing
  CHECK_OK(orSetDevice(1));
  CHECK_OK(orGetDevice(&current));
  CHECK(current == 1);
  CHECK_OK(orDeviceSynchronize());

  // Each thread has its own current device, starting at 0.
  std::latch bothSet(2);
  const auto worker = [&bothSet](int device) {
    int seen = -1;
    CHECK_OK(orGetDevice(&seen));
    CHECK(seen == 0);
    CHECK_OK(orSetDevice(device));
    bothSet.arrive_and_wait();
    CHECK_OK(orGetDevice(&seen));
    CHECK(seen == device);
    CHECK_OK(orDeviceSynchronize());
  };
  std::thread first(worker, 1), second(worker, 0);
  first.join();
  second.join();
  CHECK_OK(orGetDevice(&current));
  CHECK(current == 1);
  CHECK_OK(orSetDevice(0));
}

void testMallocFree() {
  void* ptr = reinterpret_cast<void*>(1);
  CHECK_ERR(orMalloc(nullptr, 1), orErrorInvalidValue);
  CHECK_OK(orMalloc(&ptr, 0));
  CHECK(ptr == nullptr);
  CHECK_OK(orFree(nullptr));

  size_t free = 0, total = 0;
  CHECK_OK(orMemGetInfo(&free, &total));
  CHECK(total == 8 * GiB);
  CHECK_ERR(orMemGetInfo(nullptr, &total), orErrorInvalidValue);
  CHECK_ERR(orMemGetInfo(&free, nullptr), orErrorInvalidValue);
  const size_t initial = free;

  // Sizes round up to whole pages; addresses are page-aligned.
  const std::pair<size_t, size_t> sizes[] = {
      {1, kPage},         {kPage - 1, kPage},        {kPage, kPage},
      {kPage + 1, 2 * kPage}, {MiB + 3, MiB + kPage}};
  std::vector<void*> live;
  size_t used = 0;
  for (const auto& [size, rounded] : sizes) {
    CHECK_OK(orMalloc(&ptr, size));
    CHECK(reinterpret_cast<uintptr_t>(ptr) % kPage == 0);
    used += rounded;
    CHECK(freeBytes() == initial - used);
    orPointerAttributes attributes{};
    CHECK_OK(orPointerGetAttributes(&attributes, ptr));
    CHECK(attributes.allocationSize == rounded);
    live.push_back(ptr);
  }
  // Fresh memory reads as zero.
  CHECK(readBack(live.back(), MiB) == std::vector<unsigned char>(MiB, 0));

  int local = 0;
  CHECK_ERR(orFree(&local), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("is not a device pointer");
  CHECK_ERR(orFree(offset(live[0], 1)), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("not the base of a live allocation of device 0");
  for (void* block : live) CHECK_OK(orFree(block));
  CHECK_ERR(orFree(live[0]), orErrorInvalidDevicePointer);  // double free
  CHECK(freeBytes() == initial);

  // Allocations belong to the current device; any thread may free them.
  CHECK_OK(orSetDevice(1));
  const size_t initialOnOne = freeBytes();
  CHECK_OK(orMalloc(&ptr, 3 * kPage));
  CHECK(freeBytes() == initialOnOne - 3 * kPage);
  orPointerAttributes attributes{};
  CHECK_OK(orPointerGetAttributes(&attributes, ptr));
  CHECK(attributes.type == orMemoryTypeDevice && attributes.device == 1);
  CHECK_OK(orSetDevice(0));
  CHECK(freeBytes() == initial);
  CHECK_OK(orFree(ptr));
  CHECK_OK(orSetDevice(1));
  CHECK(freeBytes() == initialOnOne);
  CHECK_OK(orSetDevice(0));
}

void testReuseWithoutGrowth() {
  constexpr size_t kBlock = 64 * MiB;
  const size_t initial = freeBytes();
  const size_t baseline = residentBytes();
  void* first = nullptr;
  bool sameAddress = true, freeRestored = true, released = true;
  for (int i = 0; i < 1000; ++i) {
    void* ptr = nullptr;
    CHECK_OK(orMalloc(&ptr, kBlock));
    if (i == 0) first = ptr;
    sameAddress = sameAddress && ptr == first;
    // Touch every page now and then: the resident set must grow, then shrink
    // back once the block is freed.
    if (i % 100 == 0) {
      void* host = nullptr;
      CHECK_OK(orMemAccessBegin(ptr, kBlock, &host));
      for (size_t page = 0; page < kBlock; page += kPage) static_cast<char*>(host)[page] = 1;
      CHECK_OK(orMemAccessEnd(ptr));
      CHECK(residentBytes() >= baseline + kBlock - MiB);
    }
    CHECK_OK(orFree(ptr));
    freeRestored = freeRestored && freeBytes() == initial;
    released = released && residentBytes() < baseline + 4 * MiB;
  }
  CHECK(sameAddress);
  CHECK(freeRestored);
  CHECK(released);
  CHECK(residentBytes() < baseline + 4 * MiB);
}

void testHostMemory() {
  void* ptr = reinterpret_cast<void*>(1);
  CHECK_ERR(orMallocHost(nullptr, 1), orErrorInvalidValue);
  CHECK_OK(orMallocHost(&ptr, 0));
  CHECK(ptr == nullptr);
  CHECK_OK(orFreeHost(nullptr));
  CHECK_ERR(orMallocHost(&ptr, SIZE_MAX), orErrorMemoryAllocation);
  CHECK_MESSAGE_HAS("orMallocHost");

  CHECK_OK(orMallocHost(&ptr, 10000));
  CHECK(reinterpret_cast<uintptr_t>(ptr) % kPage == 0);
  std::memset(ptr, 5, 10000);
  orPointerAttributes attributes{};
  for (size_t at : {size_t{0}, size_t{5000}, size_t{3 * kPage - 1}}) {
    CHECK_OK(orPointerGetAttributes(&attributes, offset(ptr, at)));
    CHECK(attributes.type == orMemoryTypeHost);
    CHECK(attributes.device == -1);
    CHECK(attributes.basePointer == ptr);
    CHECK(attributes.allocationSize == 3 * kPage);
  }
  int local = 0;
  CHECK_ERR(orFreeHost(offset(ptr, 1)), orErrorInvalidValue);
  CHECK_MESSAGE_HAS("was not returned by orMallocHost");
  CHECK_ERR(orFreeHost(&local), orErrorInvalidValue);
  CHECK_OK(orFreeHost(ptr));
  CHECK_ERR(orFreeHost(ptr), orErrorInvalidValue);
}

void testMemcpy() {
  constexpr size_t kSize = 64 * KiB;
  const std::vector<unsigned char> data = pattern(kSize, 1);
  void* a = nullptr;
  void* b = nullptr;
  CHECK_OK(orMalloc(&a, kSize));
  CHECK_OK(orMalloc(&b, kSize));

  // All four kinds.
  CHECK_OK(orMemcpy(a, data.data(), kSize, orMemcpyHostToDevice));
  CHECK(readBack(a, kSize) == data);
  CHECK_OK(orMemcpy(b, a, kSize, orMemcpyDeviceToDevice));
  CHECK(readBack(b, kSize) == data);
  std::vector<unsigned char> host(kSize);
  CHECK_OK(orMemcpy(host.data(), data.data(), kSize, orMemcpyHostToHost));
  CHECK(host == data);
  // Pinned memory is host memory for every kind.
  void* pinned = nullptr;
  CHECK_OK(orMallocHost(&pinned, kSize));
  CHECK_OK(orMemcpy(pinned, b, kSize, orMemcpyDeviceToHost));
  CHECK(std::memcmp(pinned, data.data(), kSize) == 0);
  CHECK_OK(orMemcpy(offset(a, 100), pinned, 1000, orMemcpyHostToDevice));
  CHECK_OK(orFreeHost(pinned));
  // Partial ranges inside an allocation, up to its last byte.
  CHECK_OK(orMemcpy(host.data(), offset(a, kSize - 10), 10, orMemcpyDeviceToHost));
  CHECK(std::memcmp(host.data(), data.data() + kSize - 10, 10) == 0);

  // Count 0 succeeds whatever the pointers.
  CHECK_OK(orMemcpy(nullptr, nullptr, 0, orMemcpyHostToDevice));
  CHECK_OK(orMemcpy(host.data(), reinterpret_cast<void*>(16), 0, orMemcpyDeviceToHost));

  // Validation: none of these copies touches any byte.
  const std::vector<unsigned char> before = readBack(a, kSize);
  CHECK_ERR(orMemcpy(a, data.data(), 1, static_cast<orMemcpyKind>(4)), orErrorInvalidValue);
  CHECK_MESSAGE_HAS("unknown kind 4");
  CHECK_ERR(orMemcpy(a, data.data(), 1, static_cast<orMemcpyKind>(-1)), orErrorInvalidValue);
  CHECK_ERR(orMemcpy(nullptr, data.data(), 1, orMemcpyHostToHost), orErrorInvalidValue);
  CHECK_ERR(orMemcpy(a, nullptr, 1, orMemcpyHostToDevice), orErrorInvalidValue);
  // Host pointer passed as the device side.
  CHECK_ERR(orMemcpy(host.data(), data.data(), 1, orMemcpyHostToDevice),
            orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("destination");
  CHECK_MESSAGE_HAS("is not a device pointer");
  CHECK_ERR(orMemcpy(host.data(), host.data(), 1, orMemcpyDeviceToHost),
            orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("source");
  // Device pointer passed as the host side.
  CHECK_ERR(orMemcpy(a, b, 1, orMemcpyHostToDevice), orErrorInvalidMemcpyDirection);
  CHECK_MESSAGE_HAS("source");
  CHECK_ERR(orMemcpy(b, a, 1, orMemcpyDeviceToHost), orErrorInvalidMemcpyDirection);
  CHECK_ERR(orMemcpy(host.data(), a, 1, orMemcpyHostToHost), orErrorInvalidMemcpyDirection);
  CHECK_ERR(orMemcpy(a, host.data(), 1, orMemcpyHostToHost), orErrorInvalidMemcpyDirection);
  // Ranges past the end of the allocation, and size_t overflow.
  CHECK_ERR(orMemcpy(offset(a, kSize - 10), data.data(), 11, orMemcpyHostToDevice),
            orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("exceeds its allocation");
  char range[64];
  std::snprintf(range, sizeof range, "[%p, %p)", a, offset(a, kSize));
  CHECK_MESSAGE_HAS(range);
  CHECK_ERR(orMemcpy(host.data(), offset(b, 1), kSize, orMemcpyDeviceToHost),
            orErrorInvalidDevicePointer);
  CHECK_ERR(orMemcpy(b, a, kSize + 1, orMemcpyDeviceToDevice), orErrorInvalidDevicePointer);
  CHECK_ERR(orMemcpy(offset(a, 1), a, SIZE_MAX, orMemcpyDeviceToDevice),
            orErrorInvalidDevicePointer);
  // A freed allocation (inside the arena, but not live).
  void* freed = nullptr;
  CHECK_OK(orMalloc(&freed, kPage));
  CHECK_OK(orFree(freed));
  CHECK_ERR(orMemcpy(freed, data.data(), 1, orMemcpyHostToDevice), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("not inside a live allocation of device 0");
  CHECK(readBack(a, kSize) == before);

  CHECK_OK(orFree(a));
  CHECK_OK(orFree(b));
}

void testCrossDeviceCopy() {
  constexpr size_t kSize = 3 * MiB + 123;
  const std::vector<unsigned char> data = pattern(kSize, 2);
  void* onZero = nullptr;
  void* onOne = nullptr;
  CHECK_OK(orMalloc(&onZero, kSize));
  CHECK_OK(orSetDevice(1));
  CHECK_OK(orMalloc(&onOne, kSize));
  CHECK_OK(orSetDevice(0));
  CHECK_OK(orMemcpy(onZero, data.data(), kSize, orMemcpyHostToDevice));
  CHECK_OK(orMemcpy(onOne, onZero, kSize, orMemcpyDeviceToDevice));
  CHECK(readBack(onOne, kSize) == data);
  CHECK_OK(orMemcpy(onZero, onOne, 5, orMemcpyDeviceToDevice));  // and back
  CHECK(readBack(onZero, kSize) == data);
  // Past the page-rounded end of the source.
  CHECK_ERR(orMemcpy(onZero, offset(onOne, 1), 3 * MiB + kPage, orMemcpyDeviceToDevice),
            orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("device 1");
  CHECK_OK(orFree(onOne));
  CHECK_OK(orFree(onZero));
}

void testOverlappingCopy() {
  constexpr size_t kSize = 8 * KiB, kCount = 5000, kShift = 100;
  const std::vector<unsigned char> data = pattern(kSize, 4);
  void* ptr = nullptr;
  CHECK_OK(orMalloc(&ptr, kSize));
  for (bool forward : {true, false}) {
    CHECK_OK(orMemcpy(ptr, data.data(), kSize, orMemcpyHostToDevice));
    const size_t from = forward ? 0 : kShift, to = forward ? kShift : 0;
    CHECK_OK(orMemcpy(offset(ptr, to), offset(ptr, from), kCount, orMemcpyDeviceToDevice));
    std::vector<unsigned char> expected = data;
    std::memmove(expected.data() + to, data.data() + from, kCount);
    CHECK(readBack(ptr, kSize) == expected);
  }
  CHECK_OK(orFree(ptr));
}

void testPointerAttributes() {
  orPointerAttributes attributes{};
  CHECK_ERR(orPointerGetAttributes(nullptr, &attributes), orErrorInvalidValue);

  void* ptr = nullptr;
  CHECK_OK(orMalloc(&ptr, 2 * kPage));
  for (size_t at : {size_t{0}, size_t{1}, 2 * kPage - 1}) {
    CHECK_OK(orPointerGetAttributes(&attributes, offset(ptr, at)));
    CHECK(attributes.type == orMemoryTypeDevice);
    CHECK(attributes.device == 0);
    CHECK(attributes.basePointer == ptr);
    CHECK(attributes.allocationSize == 2 * kPage);
  }
  // The host view handed out by a scoped access is ordinary host memory.
  void* view = nullptr;
  CHECK_OK(orMemAccessBegin(ptr, 1, &view));
  CHECK_OK(orPointerGetAttributes(&attributes, view));
  CHECK(attributes.type == orMemoryTypeUnregistered);
  CHECK_OK(orMemAccessEnd(ptr));
  CHECK_OK(orFree(ptr));
  CHECK_ERR(orPointerGetAttributes(&attributes, ptr), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("not inside a live allocation");

  CHECK_OK(orMallocHost(&ptr, 1));
  CHECK_OK(orPointerGetAttributes(&attributes, ptr));
  CHECK(attributes.type == orMemoryTypeHost && attributes.device == -1);
  CHECK(attributes.basePointer == ptr && attributes.allocationSize == kPage);
  CHECK_OK(orFreeHost(ptr));

  int local = 0;
  std::vector<int> heap(10);
  const void* const plainPointers[] = {&local, heap.data(), nullptr, ptr};
  for (const void* plain : plainPointers) {
    attributes = {orMemoryTypeDevice, 3, &local, 9};
    CHECK_OK(orPointerGetAttributes(&attributes, plain));
    CHECK(attributes.type == orMemoryTypeUnregistered);
    CHECK(attributes.device == -1);
    CHECK(attributes.basePointer == nullptr);
    CHECK(attributes.allocationSize == 0);
  }
}

void testScopedAccess() {
  void* ptr = nullptr;
  void* host = nullptr;
  CHECK_OK(orMalloc(&ptr, 2 * kPage));
  CHECK_ERR(orMemAccessBegin(ptr, 1, nullptr), orErrorInvalidValue);

  CHECK_OK(orMemAccessBegin(ptr, 2 * kPage, &host));
  CHECK(host != ptr);
  std::memset(host, 9, 2 * kPage);  // writes through the host view are device writes
  CHECK(readBack(ptr, 2 * kPage) == std::vector<unsigned char>(2 * kPage, 9));
  const std::vector<unsigned char> data = pattern(2 * kPage, 5);
  CHECK_OK(orMemcpy(ptr, data.data(), data.size(), orMemcpyHostToDevice));
  CHECK(std::memcmp(host, data.data(), data.size()) == 0);

  // Counted per allocation, from any pointer inside it.
  void* second = nullptr;
  CHECK_OK(orMemAccessBegin(offset(ptr, kPage), kPage, &second));
  CHECK(second == offset(host, kPage));
  void* empty = nullptr;
  CHECK_OK(orMemAccessBegin(offset(ptr, 2 * kPage - 1), 0, &empty));
  CHECK_ERR(orFree(ptr), orErrorIllegalState);
  CHECK_MESSAGE_HAS("3 open host access");
  CHECK_OK(orMemAccessEnd(offset(ptr, 2 * kPage - 1)));
  CHECK_OK(orMemAccessEnd(offset(ptr, kPage)));
  CHECK_ERR(orFree(ptr), orErrorIllegalState);
  CHECK_OK(orMemAccessEnd(ptr));
  CHECK_ERR(orMemAccessEnd(ptr), orErrorIllegalState);  // end without begin
  CHECK_MESSAGE_HAS("no open host access");

  // Ranges and pointers.
  CHECK_ERR(orMemAccessBegin(ptr, 2 * kPage + 1, &host), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("exceeds its allocation");
  CHECK_ERR(orMemAccessBegin(offset(ptr, 2 * kPage - 1), 2, &host), orErrorInvalidDevicePointer);
  CHECK_ERR(orMemAccessBegin(data.data(), 1, &host), orErrorInvalidDevicePointer);
  CHECK_ERR(orMemAccessBegin(nullptr, 0, &host), orErrorInvalidDevicePointer);
  CHECK_ERR(orMemAccessEnd(data.data()), orErrorInvalidDevicePointer);
  CHECK_OK(orFree(ptr));
  CHECK_ERR(orMemAccessBegin(ptr, 1, &host), orErrorInvalidDevicePointer);
  CHECK_ERR(orMemAccessEnd(ptr), orErrorInvalidDevicePointer);

  // Two threads open and close accesses on one allocation concurrently.
  constexpr size_t kSize = kPage;
  const std::vector<unsigned char> expected = pattern(kSize, 6);
  CHECK_OK(orMalloc(&ptr, kSize));
  CHECK_OK(orMemcpy(ptr, expected.data(), kSize, orMemcpyHostToDevice));
  std::atomic<int> errors{0};
  const auto reader = [&] {
    for (int i = 0; i < 100000; ++i) {
      void* view = nullptr;
      if (orMemAccessBegin(ptr, kSize, &view) != orSuccess ||
          std::memcmp(view, expected.data(), kSize) != 0 || orMemAccessEnd(ptr) != orSuccess) {
        errors.fetch_add(1);
      }
    }
  };
  std::thread firstReader(reader), secondReader(reader);
  firstReader.join();
  secondReader.join();
  CHECK(errors.load() == 0);
  CHECK(readBack(ptr, kSize) == expected);
  CHECK_ERR(orMemAccessEnd(ptr), orErrorIllegalState);  // every begin was ended
  CHECK_OK(orFree(ptr));
}

void testStress() {
  constexpr int kThreads = 4, kIterations = 3000;
  size_t initial[2];
  for (int device : {0, 1}) {
    CHECK_OK(orSetDevice(device));
    initial[device] = freeBytes();
  }
  CHECK_OK(orSetDevice(0));
  std::atomic<int> errors{0};
  const auto worker = [&](int id) {
    std::mt19937 random(id);
    struct Block {
      void* ptr;
      size_t size;
      unsigned seed;
    };
    std::vector<Block> blocks;
    const auto expect = [&](bool ok) {
      if (!ok) errors.fetch_add(1);
    };
    for (int i = 0; i < kIterations; ++i) {
      const unsigned choice = random() % 4;
      if (choice <= 1 || blocks.size() < 2) {
        expect(orSetDevice(static_cast<int>(random() % 2)) == orSuccess);
        const size_t size = 1 + random() % (64 * KiB);
        const unsigned seed = static_cast<unsigned>(random());
        void* ptr = nullptr;
        expect(orMalloc(&ptr, size) == orSuccess);
        const std::vector<unsigned char> data = pattern(size, seed);
        expect(orMemcpy(ptr, data.data(), size, orMemcpyHostToDevice) == orSuccess);
        blocks.push_back({ptr, size, seed});
      } else if (choice == 2) {  // device-to-device, possibly across devices
        Block& to = blocks[random() % blocks.size()];
        const Block& from = blocks[random() % blocks.size()];
        if (&to == &from) continue;
        const size_t count = std::min(to.size, from.size);
        expect(orMemcpy(to.ptr, from.ptr, count, orMemcpyDeviceToDevice) == orSuccess);
        std::vector<unsigned char> expected = pattern(to.size, to.seed);
        const std::vector<unsigned char> copied = pattern(from.size, from.seed);
        std::memcpy(expected.data(), copied.data(), count);
        std::vector<unsigned char> actual(to.size);
        expect(orMemcpy(actual.data(), to.ptr, to.size, orMemcpyDeviceToHost) == orSuccess);
        expect(actual == expected);
        expect(orMemcpy(to.ptr, pattern(to.size, to.seed).data(), to.size,
                        orMemcpyHostToDevice) == orSuccess);
      } else {
        const size_t index = random() % blocks.size();
        const Block block = blocks[index];
        std::vector<unsigned char> actual(block.size);
        expect(orMemcpy(actual.data(), block.ptr, block.size, orMemcpyDeviceToHost) == orSuccess);
        expect(actual == pattern(block.size, block.seed));
        expect(orFree(block.ptr) == orSuccess);
        blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(index));
      }
    }
    for (const Block& block : blocks) expect(orFree(block.ptr) == orSuccess);
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) threads.emplace_back(worker, id);
  for (std::thread& thread : threads) thread.join();
  CHECK(errors.load() == 0);
  for (int device : {0, 1}) {
    CHECK_OK(orSetDevice(device));
    CHECK(freeBytes() == initial[device]);
  }
  CHECK_OK(orSetDevice(0));
}

}  // namespace

int main() {
  counters = static_cast<Counters*>(mmap(nullptr, sizeof(Counters), PROT_READ | PROT_WRITE,
                                         MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (counters == MAP_FAILED) return 2;
  new (counters) Counters{};
  // The in-process tests expect the defaults, whatever the caller's shell has.
  for (const char* name : kEnvironment) unsetenv(name);

  const std::pair<const char*, void (*)()> tests[] = {
      // Forking tests first: the parent must not have read the configuration.
      {"default environment", testDefaultEnvironment},
      {"valid environment", testValidEnvironment},
      {"invalid environment", testInvalidEnvironment},
      {"out of memory", testOutOfMemory},
      {"coalescing", testCoalescing},
      {"memory protection", testMemoryProtection},
      {"error strings", testErrorStrings},
      {"devices", testDevices},
      {"malloc and free", testMallocFree},
      {"reuse without growth", testReuseWithoutGrowth},
      {"host memory", testHostMemory},
      {"memcpy", testMemcpy},
      {"cross-device copy", testCrossDeviceCopy},
      {"overlapping copy", testOverlappingCopy},
      {"pointer attributes", testPointerAttributes},
      {"scoped access", testScopedAccess},
      {"stress", testStress},
  };
  for (const auto& [name, test] : tests) {
    const int failedBefore = counters->failed.load();
    test();
    std::printf("%-22s %s\n", name, counters->failed.load() == failedBefore ? "ok" : "FAILED");
  }
  std::printf("%d passed, %d failed\n", counters->passed.load(), counters->failed.load());
  return counters->failed.load() == 0 ? 0 : 1;
}
