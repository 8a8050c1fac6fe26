// The configuration the runtime reads from the environment at first use, and a
// child forked after the runtime started. The configuration tests run in forked
// children, before the test process calls the API (see test_runtime.cpp).
#include "harness.h"

namespace openreg_test {
namespace {

// Every entry point fails with orErrorInitializationError and a message that
// names the variable, its value and what is valid.
void checkEverythingFails(const std::string& name, const std::string& value, const char* validRange) {
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
  CHECK_ERR(orMemcpyAsync(host, host + 8, 8, orMemcpyHostToHost, stream), orErrorInitializationError);
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

}  // namespace

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
  const std::pair<const char*, size_t> sizes[] = {{"4096", 4096},  {"5000", 8192}, {"64K", 64 * KiB}, {"64k", 64 * KiB},
                                                  {"3m", 3 * MiB}, {"1G", GiB},    {"2g", 2 * GiB}};
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

void testInvalidEnvironment() {
  struct Case {
    const char* name;
    std::vector<const char*> values;
    const char* validRange;
  };
  const Case cases[] = {
      {"OPENREG_DEVICE_COUNT", {"0", "17", "abc", "", "-1", " 2", "2x", "99999999999999999999"}, "1..16"},
      {"OPENREG_DEVICE_MEMORY",
       {"1K", "0", "4095", "abc", "", "12X", "G", "1.5G", "-4096", "99999999999G", "8 G"},
       "at least 4096"},
      {"OPENREG_MEMORY_PROTECTION", {"2", "", "on", "00", "true"}, "0 (off) or 1 (on)"},
  };
  for (const Case& c : cases) {
    for (const char* value : c.values) {
      const std::string name = c.name, text = value;
      const char* validRange = c.validRange;
      CHECK_CHILD_EXITED_CLEANLY(runInChild({{c.name, value}}, [&] { checkEverythingFails(name, text, validRange); }));
    }
  }
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

}  // namespace openreg_test
