// Devices (count, current device, properties, synchronization) and error
// names and messages.
#include <latch>

#include "harness.h"

namespace openreg_test {

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
      {orErrorHostWriteDuringCopy, "orErrorHostWriteDuringCopy"},
  };
  std::vector<std::string> strings;
  for (const auto& [code, name] : names) {
    CHECK(std::strcmp(orGetErrorName(code), name) == 0);
    const std::string text = orGetErrorString(code);
    CHECK(!text.empty() && text != "unrecognized error code");
    for (const std::string& earlier : strings)
      CHECK(text != earlier);
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

}  // namespace openreg_test
