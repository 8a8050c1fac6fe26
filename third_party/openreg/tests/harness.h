// The checks and helpers shared by the runtime's test files (no test
// framework: the runtime has no dependencies, and neither have its tests).
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "openreg.h"

namespace openreg_test {

struct Counters {
  std::atomic<int> passed;
  std::atomic<int> failed;
};

// In MAP_SHARED memory so that forked children count too.
inline Counters* counters;

inline void record(bool ok, const std::string& expression, const char* file, int line, const std::string& detail) {
  if (ok) {
    counters->passed.fetch_add(1);
    return;
  }
  counters->failed.fetch_add(1);
  std::fprintf(
      stderr, "FAIL %s:%d: %s%s%s\n", file, line, expression.c_str(), detail.empty() ? "" : ": ", detail.c_str());
}

inline std::string errorDetail(orError_t got) {
  return std::string("got ") + orGetErrorName(got) + " (" + orGetLastErrorMessage() + ")";
}

#define CHECK(condition) record((condition), #condition, __FILE__, __LINE__, "")

#define CHECK_ERR(expression, expected)                                       \
  do {                                                                        \
    const orError_t got_ = (expression);                                      \
    record(                                                                   \
        got_ == (expected), #expression " == " #expected, __FILE__, __LINE__, \
        got_ == (expected) ? "" : errorDetail(got_));                         \
  } while (0)

#define CHECK_OK(expression) CHECK_ERR(expression, orSuccess)

// The last error message of this thread contains text.
#define CHECK_MESSAGE_HAS(text)                                                        \
  record(                                                                              \
      std::strstr(orGetLastErrorMessage(), std::string(text).c_str()) != nullptr,      \
      "last error message contains \"" + std::string(text) + "\"", __FILE__, __LINE__, \
      std::string("message is \"") + orGetLastErrorMessage() + "\"")

const char* const kEnvironment[] = {"OPENREG_DEVICE_COUNT", "OPENREG_DEVICE_MEMORY", "OPENREG_MEMORY_PROTECTION"};

using Environment = std::vector<std::pair<const char*, const char*>>;

// Runs body in a forked child with the OPENREG_* variables replaced by env;
// returns the child's wait status.
inline int runInChild(const Environment& env, const std::function<void()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    for (const char* name : kEnvironment)
      unsetenv(name);
    for (const auto& [name, value] : env)
      setenv(name, value, 1);
    body();
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

#define CHECK_CHILD_EXITED_CLEANLY(status) CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0)

inline size_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

constexpr size_t kPage = 4096;
constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;
constexpr size_t GiB = 1024 * MiB;

inline size_t freeBytes() {
  size_t free = 0, total = 0;
  orMemGetInfo(&free, &total);
  return free;
}

inline std::vector<unsigned char> pattern(size_t size, unsigned seed) {
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i)
    bytes[i] = static_cast<unsigned char>(i * 131 + seed * 7 + 1);
  return bytes;
}

inline std::vector<unsigned char> readBack(const void* devPtr, size_t size) {
  std::vector<unsigned char> bytes(size);
  CHECK_OK(orMemcpy(bytes.data(), devPtr, size, orMemcpyDeviceToHost));
  return bytes;
}

inline char* offset(void* ptr, size_t bytes) {
  return static_cast<char*>(ptr) + bytes;
}

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline double millisecondsSince(Clock::time_point start) {
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
inline orError_t launch(orStream_t stream, std::function<void()> body) {
  auto* heap = new std::function<void()>(std::move(body));
  const orError_t error = orLaunchHostFunc(
      stream,
      [](void* data) {
        auto* closure = static_cast<std::function<void()>*>(data);
        (*closure)();
        delete closure;
      },
      heap);
  if (error != orSuccess)
    delete heap;
  return error;
}

// Blocks stream until gate opens.
inline orError_t block(orStream_t stream, Gate& gate) {
  return orLaunchHostFunc(stream, [](void* data) { static_cast<Gate*>(data)->wait(); }, &gate);
}

inline std::string handleText(const void* handle) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", handle);
  return text;
}

inline int threadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0)
      return std::atoi(line.c_str() + 8);
  }
  return -1;
}

// A joined thread may still be counted for a moment after join returns.
inline bool threadCountSettlesAt(int expected) {
  for (int i = 0; i < 1000 && threadCount() != expected; ++i)
    std::this_thread::sleep_for(1ms);
  return threadCount() == expected;
}

// Runs an existing test again with completion checks on (orSetCompletionChecks).
template <void (*test)()>
void withCompletionChecks() {
  CHECK_OK(orSetCompletionChecks(1));
  test();
  CHECK_OK(orSetCompletionChecks(0));
}

// User plus system time of the whole process.
inline double cpuMilliseconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
      (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
}

}  // namespace openreg_test
