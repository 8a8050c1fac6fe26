// Self-contained tests of the openreg runtime through its public C API.
//
// The configuration is read once per process, so every test that needs a
// particular environment runs in a forked child that sets it before its first
// API call. Those children are forked before the parent calls the API at all
// (see main); checks made in a child count in the shared counters below.

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <latch>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <tuple>
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
  record(std::strstr(orGetLastErrorMessage(), std::string(text).c_str()) != nullptr,        \
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

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A flag that host functions block on until the test opens it. Waits give up
// after 10 s, so a runtime that never runs the opener fails instead of hanging.
class Gate {
 public:
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }
  bool wait() {
    std::unique_lock lock(mutex_);
    return opened_.wait_for(lock, 10s, [this] { return open_; });
  }
  bool isOpen() {
    std::lock_guard lock(mutex_);
    return open_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

// orLaunchHostFunc for a closure.
orError_t launch(orStream_t stream, std::function<void()> body) {
  auto* heap = new std::function<void()>(std::move(body));
  const orError_t error = orLaunchHostFunc(
      stream,
      [](void* data) {
        auto* closure = static_cast<std::function<void()>*>(data);
        (*closure)();
        delete closure;
      },
      heap);
  if (error != orSuccess) delete heap;
  return error;
}

// Blocks stream until gate opens.
orError_t block(orStream_t stream, Gate& gate) {
  return orLaunchHostFunc(stream, [](void* data) { static_cast<Gate*>(data)->wait(); }, &gate);
}

std::string handleText(const void* handle) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", handle);
  return text;
}

int threadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

// A joined thread may still be counted for a moment after join returns.
bool threadCountSettlesAt(int expected) {
  for (int i = 0; i < 1000 && threadCount() != expected; ++i) std::this_thread::sleep_for(1ms);
  return threadCount() == expected;
}

// User plus system time of the whole process.
double cpuMilliseconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
}

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
  orStream_t stream = nullptr;
  orEvent_t event = nullptr;
  float ms = 0;
  CHECK_ERR(orStreamCreate(&stream), orErrorInitializationError);
  CHECK_ERR(orStreamCreateWithPriority(&stream, 0, 0), orErrorInitializationError);
  CHECK_ERR(orStreamDestroy(stream), orErrorInitializationError);
  CHECK_ERR(orStreamQuery(stream), orErrorInitializationError);
  CHECK_ERR(orStreamSynchronize(stream), orErrorInitializationError);
  CHECK_ERR(orStreamWaitEvent(stream, event, 0), orErrorInitializationError);
  CHECK_ERR(orStreamGetDevice(stream, &number), orErrorInitializationError);
  CHECK_ERR(orStreamGetPriority(stream, &number), orErrorInitializationError);
  CHECK_ERR(orDeviceGetStreamPriorityRange(&number, &number), orErrorInitializationError);
  CHECK_ERR(orLaunchHostFunc(stream, [](void*) {}, nullptr), orErrorInitializationError);
  CHECK_ERR(orMemcpyAsync(host, host + 8, 8, orMemcpyHostToHost, stream),
            orErrorInitializationError);
  CHECK_ERR(orEventCreate(&event), orErrorInitializationError);
  CHECK_ERR(orEventCreateWithFlags(&event, 0), orErrorInitializationError);
  CHECK_ERR(orEventRecord(event, stream), orErrorInitializationError);
  CHECK_ERR(orEventQuery(event), orErrorInitializationError);
  CHECK_ERR(orEventSynchronize(event), orErrorInitializationError);
  CHECK_ERR(orEventElapsedTime(&ms, event, event), orErrorInitializationError);
  CHECK_ERR(orEventDestroy(event), orErrorInitializationError);
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

// A range that starts in one allocation and runs into its live neighbour
// covers only live memory, yet belongs to no single allocation: every entry
// point that takes a range rejects it.
void testRangeAcrossAdjacentAllocations() {
  CHECK_CHILD_EXITED_CLEANLY(runInChild({{"OPENREG_DEVICE_MEMORY", "64K"}}, [] {
    void* first = nullptr;
    void* second = nullptr;
    CHECK_OK(orMalloc(&first, 16 * KiB));
    CHECK_OK(orMalloc(&second, 16 * KiB));
    CHECK(second == offset(first, 16 * KiB));
    const std::vector<unsigned char> data = pattern(16 * KiB, 7);
    CHECK_OK(orMemcpy(second, data.data(), data.size(), orMemcpyHostToDevice));
    void* straddling = offset(first, 8 * KiB);
    std::vector<unsigned char> host(16 * KiB);
    CHECK_ERR(orMemcpy(straddling, host.data(), host.size(), orMemcpyHostToDevice),
              orErrorInvalidDevicePointer);
    CHECK_MESSAGE_HAS("exceeds its allocation");
    CHECK_ERR(orMemcpy(host.data(), straddling, host.size(), orMemcpyDeviceToHost),
              orErrorInvalidDevicePointer);
    CHECK_ERR(orMemcpy(straddling, second, host.size(), orMemcpyDeviceToDevice),
              orErrorInvalidDevicePointer);
    CHECK_ERR(orMemcpyAsync(straddling, host.data(), host.size(), orMemcpyHostToDevice, nullptr),
              orErrorInvalidDevicePointer);
    void* view = nullptr;
    CHECK_ERR(orMemAccessBegin(straddling, host.size(), &view), orErrorInvalidDevicePointer);
    CHECK_MESSAGE_HAS("exceeds its allocation");
    CHECK_OK(orStreamSynchronize(nullptr));
    CHECK(readBack(second, data.size()) == data);  // the neighbour is untouched
    CHECK_OK(orFree(first));
    CHECK_OK(orFree(second));
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

// ------------------------------------------- inter-process sharing (children)

// A one-way pipe between two of the children below. Each process keeps only
// the end it uses, so a reader sees end-of-file once its writer exits.
struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int ends[2];
    if (pipe(ends) == 0) std::tie(read, write) = std::tie(ends[0], ends[1]);
  }
};

void closeAll(std::initializer_list<int> fds) {
  for (int fd : fds) close(fd);
}

// Reads exactly `bytes`; false on end-of-file, an error, or 10 s without data,
// so a child whose peer died fails instead of hanging.
bool receive(int fd, void* data, size_t bytes) {
  auto* cursor = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, 10000) != 1) return false;
    const ssize_t got = ::read(fd, cursor, bytes);
    if (got <= 0) return false;
    cursor += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

bool send(int fd, const void* data, size_t bytes) {
  return ::write(fd, data, bytes) == static_cast<ssize_t>(bytes);
}

// Forks a child that runs body with env (before any API call) and exits.
pid_t startChild(const Environment& env, const std::function<void()>& body) {
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
  return pid;
}

// Waits up to 20 s for the child, then kills it; returns its wait status.
int reap(pid_t pid) {
  int status = 0;
  for (int i = 0; i < 2000; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(10ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

// One exporter and two importers, the processes a CUDA IPC test would use.
void testIpc() {
  constexpr size_t kSize = 3 * kPage;
  const std::vector<unsigned char> exported = pattern(kSize, 11);
  const std::vector<unsigned char> imported = pattern(kSize, 12);
  Pipe handleToImporter, handleToSmallImporter, importerWrote, exporterChecked;
  const Environment twoDevices{{"OPENREG_DEVICE_COUNT", "2"}};

  const pid_t exporter = startChild(twoDevices, [&] {
    closeAll({handleToImporter.read, handleToSmallImporter.read, importerWrote.write,
              exporterChecked.read});
    CHECK_OK(orSetDevice(1));
    void* ptr = nullptr;
    CHECK_OK(orMalloc(&ptr, kSize));
    CHECK_OK(orMemcpy(ptr, exported.data(), kSize, orMemcpyHostToDevice));
    orIpcMemHandle_t handle{};
    CHECK_ERR(orIpcGetMemHandle(nullptr, ptr), orErrorInvalidValue);
    int local = 0;
    CHECK_ERR(orIpcGetMemHandle(&handle, &local), orErrorInvalidDevicePointer);
    orIpcMemHandle_t inner{};
    CHECK_OK(orIpcGetMemHandle(&inner, offset(ptr, kPage + 5)));  // the whole allocation
    CHECK_OK(orIpcGetMemHandle(&handle, ptr));
    CHECK(std::memcmp(&inner, &handle, sizeof handle) == 0);
    void* self = nullptr;
    CHECK_ERR(orIpcOpenMemHandle(&self, handle, 0), orErrorInvalidValue);
    CHECK_MESSAGE_HAS("exported by this process");
    CHECK(send(handleToImporter.write, &handle, sizeof handle));
    CHECK(send(handleToSmallImporter.write, &handle, sizeof handle));
    char signal = 0;
    CHECK(receive(importerWrote.read, &signal, 1));
    CHECK(readBack(ptr, kSize) == imported);  // the importer's writes
    CHECK(send(exporterChecked.write, &signal, 1));
  });

  const pid_t smallImporter = startChild({{"OPENREG_DEVICE_COUNT", "1"}}, [&] {
    closeAll({handleToImporter.read, handleToImporter.write, handleToSmallImporter.write,
              importerWrote.read, importerWrote.write, exporterChecked.read,
              exporterChecked.write});
    orIpcMemHandle_t handle{};
    CHECK(receive(handleToSmallImporter.read, &handle, sizeof handle));
    void* ptr = nullptr;
    CHECK_ERR(orIpcOpenMemHandle(&ptr, handle, 0), orErrorInvalidDevice);
    CHECK_MESSAGE_HAS("exported from device 1 of process");
    CHECK_MESSAGE_HAS("this process has 1 device");
  });

  const pid_t importer = startChild(twoDevices, [&] {
    closeAll({handleToImporter.write, handleToSmallImporter.read, handleToSmallImporter.write,
              importerWrote.read, exporterChecked.write});
    orIpcMemHandle_t handle{};
    CHECK(receive(handleToImporter.read, &handle, sizeof handle));
    void* ptr = nullptr;
    CHECK_ERR(orIpcOpenMemHandle(nullptr, handle, 0), orErrorInvalidValue);
    CHECK_ERR(orIpcOpenMemHandle(&ptr, handle, 1), orErrorInvalidValue);
    CHECK_ERR(orIpcOpenMemHandle(&ptr, orIpcMemHandle_t{}, 0), orErrorInvalidValue);
    CHECK_MESSAGE_HAS("not made by orIpcGetMemHandle");

    CHECK_OK(orIpcOpenMemHandle(&ptr, handle, 0));
    void* again = nullptr;
    CHECK_OK(orIpcOpenMemHandle(&again, handle, 0));
    CHECK(again == ptr);  // mapped once, counted
    orPointerAttributes attributes{};
    CHECK_OK(orPointerGetAttributes(&attributes, offset(ptr, kPage)));
    CHECK(attributes.type == orMemoryTypeDevice && attributes.device == 1);
    CHECK(attributes.basePointer == ptr && attributes.allocationSize == kSize);
    CHECK(readBack(ptr, kSize) == exported);

    // Protected like the importer's own device memory.
    const pid_t reader = fork();
    if (reader == 0) {
      rlimit noCore{0, 0};
      setrlimit(RLIMIT_CORE, &noCore);
      _exit(*static_cast<volatile unsigned char*>(ptr));
    }
    const int status = reap(reader);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);

    // Scoped access, copies in every direction, and the rules of device memory.
    void* host = nullptr;
    CHECK_OK(orMemAccessBegin(offset(ptr, kPage), kPage, &host));
    CHECK(std::memcmp(host, exported.data() + kPage, kPage) == 0);
    CHECK_OK(orIpcCloseMemHandle(ptr));  // one of two opens
    CHECK_ERR(orIpcCloseMemHandle(ptr), orErrorIllegalState);
    CHECK_MESSAGE_HAS("open host access");
    CHECK_OK(orMemAccessEnd(offset(ptr, kPage)));
    CHECK_OK(orMemcpy(ptr, imported.data(), kSize, orMemcpyHostToDevice));
    void* local = nullptr;
    CHECK_OK(orMalloc(&local, kSize));  // device 0
    CHECK_OK(orMemcpy(local, ptr, kSize, orMemcpyDeviceToDevice));
    CHECK(readBack(local, kSize) == imported);
    CHECK_OK(orMemcpyAsync(local, ptr, kSize, orMemcpyDeviceToDevice, nullptr));
    CHECK_OK(orStreamSynchronize(nullptr));
    std::vector<unsigned char> bytes(kSize);
    CHECK_ERR(orMemcpy(bytes.data(), ptr, kSize, orMemcpyHostToHost),
              orErrorInvalidMemcpyDirection);
    CHECK_ERR(orFree(ptr), orErrorInvalidDevicePointer);
    CHECK_MESSAGE_HAS("orIpcCloseMemHandle");
    orIpcMemHandle_t reexported{};
    CHECK_ERR(orIpcGetMemHandle(&reexported, ptr), orErrorInvalidValue);
    CHECK_MESSAGE_HAS("only the process that allocated it");
    char signal = 1;
    CHECK(send(importerWrote.write, &signal, 1));
    CHECK(receive(exporterChecked.read, &signal, 1));

    // The exporter exits (end-of-file); the opened pages stay valid.
    CHECK(!receive(exporterChecked.read, &signal, 1));
    CHECK(readBack(ptr, kSize) == imported);
    CHECK_OK(orIpcCloseMemHandle(ptr));
    CHECK_ERR(orIpcCloseMemHandle(ptr), orErrorInvalidDevicePointer);
    CHECK_OK(orPointerGetAttributes(&attributes, ptr));
    CHECK(attributes.type == orMemoryTypeUnregistered);
    CHECK_ERR(orIpcOpenMemHandle(&ptr, handle, 0), orErrorInvalidResourceHandle);
    CHECK_MESSAGE_HAS("has exited");
    CHECK_OK(orFree(local));
  });

  closeAll({handleToImporter.read, handleToImporter.write, handleToSmallImporter.read,
            handleToSmallImporter.write, importerWrote.read, importerWrote.write,
            exporterChecked.read, exporterChecked.write});
  for (const pid_t pid : {exporter, smallImporter, importer}) {
    CHECK_CHILD_EXITED_CLEANLY(reap(pid));
  }
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
      {orErrorNotReady, "orErrorNotReady"},
      {orErrorInvalidResourceHandle, "orErrorInvalidResourceHandle"},
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

// Large copies at every alignment class: the runtime copies a destination a
// little ahead of its source (modulo a page) backwards with streaming stores,
// and everything else with memcpy; every byte must land either way, including
// the unaligned head and tail.
void testLargeCopyAlignments() {
  constexpr size_t kSize = 5 * MiB + 77;
  constexpr size_t kSlack = 2 * kPage;
  const std::vector<unsigned char> data = pattern(kSize + kSlack, 5);
  void* device = nullptr;
  CHECK_OK(orMalloc(&device, kSize + kSlack));
  CHECK_OK(orMemcpy(device, data.data(), kSize + kSlack, orMemcpyHostToDevice));
  // Page-aligned host memory, so that the offsets below are exact.
  void* host = nullptr;
  CHECK_OK(orMallocHost(&host, kSize + kSlack));
  for (const size_t source : {size_t{0}, size_t{1}, size_t{48}}) {
    for (const size_t target : {size_t{0}, size_t{1}, size_t{15}, size_t{64}, size_t{100},
                                size_t{2047}, size_t{2048}, size_t{4095}}) {
      std::memset(host, 0, kSize + kSlack);
      CHECK_OK(orMemcpy(offset(host, target), offset(device, source), kSize,
                        orMemcpyDeviceToHost));
      const auto* bytes = static_cast<const unsigned char*>(host);
      CHECK(std::memcmp(bytes + target, data.data() + source, kSize) == 0);
      // Nothing written outside the destination range.
      CHECK(std::all_of(bytes, bytes + target, [](unsigned char b) { return b == 0; }));
      CHECK(std::all_of(bytes + target + kSize, bytes + kSize + kSlack,
                        [](unsigned char b) { return b == 0; }));
    }
  }
  // The other directions take the same path.
  void* other = nullptr;
  CHECK_OK(orMalloc(&other, kSize + kSlack));
  CHECK_OK(orMemcpy(offset(other, 64), device, kSize, orMemcpyDeviceToDevice));
  std::vector<unsigned char> expected(data.begin(), data.begin() + kSize);
  CHECK(readBack(offset(other, 64), kSize) == expected);
  CHECK_OK(orMemcpy(offset(other, 100), offset(host, 4095), kSize, orMemcpyHostToDevice));
  CHECK(std::memcmp(readBack(offset(other, 100), kSize).data(),
                    static_cast<unsigned char*>(host) + 4095, kSize) == 0);
  CHECK_OK(orFree(other));
  CHECK_OK(orFreeHost(host));
  CHECK_OK(orFree(device));
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

// ------------------------------------------------------- streams, events

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
  const std::pair<int, int> priorities[] = {{0, 0},   {-1, -1},      {-2, -2}, {-3, -2},
                                            {1, 0},   {INT_MIN, -2}, {INT_MAX, 0}};
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
  for (orStream_t& each : many) CHECK_OK(orStreamCreate(&each));
  CHECK(threadCount() == threadsBefore);
  CHECK_OK(orLaunchHostFunc(many[0], [](void*) {}, nullptr));
  CHECK(threadCount() == threadsBefore + 1);
  for (orStream_t each : many) CHECK_OK(orStreamDestroy(each));
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
  CHECK_ERR(orMemcpyAsync(host, host + 4, 4, orMemcpyHostToHost, stream),
            orErrorInvalidResourceHandle);
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
      const orError_t error = orLaunchHostFunc(
          stream, [](void* counter) { static_cast<std::atomic<int>*>(counter)->fetch_add(1); },
          &ran);
      if (error != orSuccess) {
        CHECK(error == orErrorInvalidResourceHandle);
        return;
      }
      accepted.fetch_add(1);
      started = true;
    }
  });
  while (!started) std::this_thread::yield();
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
    record(millisecondsSince(start) >= 150 && cpu < 50, std::string(name) + " sleeps", __FILE__,
           __LINE__, "cpu " + std::to_string(cpu) + " ms");
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
  for (int i = 0; inOrder && i < kFunctions; ++i) inOrder = order[i] == i;
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
  CHECK_OK(orMemcpyAsync(host.data(), reinterpret_cast<void*>(16), 0, orMemcpyDeviceToHost,
                         nullptr));
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
  const auto delay = [](orStream_t on) {
    CHECK_OK(launch(on, [] { std::this_thread::sleep_for(50ms); }));
  };

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
  for (orStream_t stream : {a, b, c}) CHECK_OK(orStreamDestroy(stream));
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
  CHECK_MESSAGE_HAS("start event " + handleText(start) + " was recorded on device 0 and the end event " +
                    handleText(other) + " on device 1");
  CHECK_ERR(orEventElapsedTime(&ms, other, start), orErrorInvalidResourceHandle);
  CHECK_MESSAGE_HAS("recorded on device 1 and the end event");
  CHECK_OK(orEventRecord(other, stream));  // recorded again, on device 0
  CHECK_OK(orEventSynchronize(other));
  CHECK_OK(orEventElapsedTime(&ms, start, other));

  for (orEvent_t event : {start, end, untimed, other}) CHECK_OK(orEventDestroy(event));
  CHECK_OK(orStreamDestroy(stream));
}

void testDefaultStream() {
  int device = -1, priority = 1, seen = -1;
  CHECK_OK(orSetDevice(1));
  CHECK_OK(orStreamGetDevice(nullptr, &device));
  CHECK(device == 1);
  CHECK_OK(orStreamGetPriority(nullptr, &priority));
  CHECK(priority == 0);
  CHECK_OK(
      orLaunchHostFunc(nullptr, [](void* out) { orGetDevice(static_cast<int*>(out)); }, &seen));
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
      if (!ok) errors.fetch_add(1);
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
      expect(orMemcpyAsync(offset(a, at), source.data() + at, kChunk, orMemcpyHostToDevice,
                           stream) == orSuccess);
      expect(orMemcpyAsync(offset(b, at), offset(a, at), kChunk, orMemcpyDeviceToDevice,
                           stream) == orSuccess);
      expect(orMemcpyAsync(result.data() + at, offset(b, at), kChunk, orMemcpyDeviceToHost,
                           stream) == orSuccess);
      expect(orLaunchHostFunc(stream, [](void* count) { ++*static_cast<int*>(count); },
                              &calls) == orSuccess);
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
  for (int id = 0; id < kThreads; ++id) threads.emplace_back(worker, id);
  for (std::thread& thread : threads) thread.join();
  CHECK(errors.load() == 0);
  CHECK(threadCountSettlesAt(threadsBefore));  // every stream's worker was joined
  for (int device : {0, 1}) {
    CHECK_OK(orSetDevice(device));
    CHECK(freeBytes() == initial[device]);
    CHECK_OK(orStreamQuery(nullptr));
  }
  CHECK_OK(orSetDevice(0));
}

}  // namespace

// Runs after the in-process tests, so the runtime has started in this process.
// ---------------------------------------------------------------- activities

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
            {a->kind, a->name, a->device, a->stream, a->correlationId, a->start, a->end,
             a->memcpyKind, a->bytes});
      },
      &all));
  return all;
}

int64_t epochNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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
  CHECK_OK(orLaunchHostFunc(
      stream, [](void* counter) { static_cast<std::atomic<int>*>(counter)->fetch_add(1); }, &ran));
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
      if (a.kind == kind && (kind != orActivityKindMemcpy || a.memcpyKind == copy)) return a;
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
    if (a.kind != orActivityKindHostFunc) continue;
    CHECK(a.name == "Host function" && a.stream == stream && a.correlationId == 42);
    if (a.start > fn.start) fn = a;
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
  CHECK_ERR(orKernelBegin(reinterpret_cast<orStream_t>(999999), "k", 1, &kernel),
            orErrorInvalidResourceHandle);
  CHECK(kernel == nullptr);
  CHECK_OK(orActivityDisable());

  CHECK_OK(orStreamDestroy(stream));
  CHECK_OK(orFree(dev));
}

void testForkedChild() {
  CHECK_CHILD_EXITED_CLEANLY(runInChild({}, [] {
    void* ptr = nullptr;
    CHECK(orMalloc(&ptr, kPage) == orErrorInitializationError);
    CHECK(std::string(orGetLastErrorMessage()).find("forked") != std::string::npos);
    int count = 0;
    CHECK(orGetDeviceCount(&count) == orErrorInitializationError);
    CHECK(orStreamSynchronize(nullptr) == orErrorInitializationError);
  }));
  // The parent is unaffected.
  void* ptr = nullptr;
  CHECK_OK(orMalloc(&ptr, kPage));
  CHECK_OK(orFree(ptr));
}

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
      {"adjacent ranges", testRangeAcrossAdjacentAllocations},
      {"memory protection", testMemoryProtection},
      {"inter-process sharing", testIpc},
      {"error strings", testErrorStrings},
      {"devices", testDevices},
      {"malloc and free", testMallocFree},
      {"reuse without growth", testReuseWithoutGrowth},
      {"host memory", testHostMemory},
      {"memcpy", testMemcpy},
      {"large copy alignments", testLargeCopyAlignments},
      {"cross-device copy", testCrossDeviceCopy},
      {"overlapping copy", testOverlappingCopy},
      {"pointer attributes", testPointerAttributes},
      {"scoped access", testScopedAccess},
      {"stress", testStress},
      {"stream basics", testStreamBasics},
      {"stream destroy", testStreamDestroy},
      {"stream query", testStreamQuery},
      {"stream order", testStreamOrder},
      {"concurrent streams", testConcurrentStreams},
      {"async copies", testAsyncCopies},
      {"async copy validation", testMemcpyAsyncValidation},
      {"free waits for copies", testFreeWaitsForQueuedCopies},
      {"stream wait event", testStreamWaitEvent},
      {"events", testEvents},
      {"default stream", testDefaultStream},
      {"stream stress", testStreamStress},
      {"activities", testActivities},
      {"forked child", testForkedChild},
  };
  for (const auto& [name, test] : tests) {
    const int failedBefore = counters->failed.load();
    test();
    std::printf("%-22s %s\n", name, counters->failed.load() == failedBefore ? "ok" : "FAILED");
  }
  std::printf("%d passed, %d failed\n", counters->passed.load(), counters->failed.load());
  return counters->failed.load() == 0 ? 0 : 1;
}
