// Reaching device memory: the protected user view faults, pointer attributes,
// and scoped host access (orMemAccessBegin / orMemAccessEnd, and their batches).
#include <signal.h>

#include "harness.h"

namespace openreg_test {

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
      if (orMemAccessBegin(ptr, kSize, &view) != orSuccess || std::memcmp(view, expected.data(), kSize) != 0 ||
          orMemAccessEnd(ptr) != orSuccess) {
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

// The open access count of the allocation at ptr, counted by ending
// accesses until none is left, then reopening as many.
size_t openAccesses(void* ptr) {
  size_t open = 0;
  while (orMemAccessEnd(ptr) == orSuccess)
    ++open;
  for (size_t i = 0; i < open; ++i) {
    void* host = nullptr;
    CHECK_OK(orMemAccessBegin(ptr, 0, &host));
  }
  return open;
}

void testBatchedAccess() {
  void* first = nullptr;
  void* second = nullptr;
  CHECK_OK(orMalloc(&first, 2 * kPage));
  CHECK_OK(orMalloc(&second, kPage));
  const std::vector<unsigned char> data = pattern(kPage, 3);
  CHECK_OK(orMemcpy(second, data.data(), kPage, orMemcpyHostToDevice));

  // Three ranges, two in one allocation (one of them empty), like a kernel's
  // output and inputs: each gets the host view orMemAccessBegin would give.
  const void* ptrs[] = {offset(first, kPage), second, first};
  const size_t sizes[] = {kPage, kPage, 0};
  void* hosts[3] = {};
  CHECK_OK(orMemAccessBeginBatch(3, ptrs, sizes, hosts));
  for (size_t i = 0; i < 3; ++i) {
    void* alone = nullptr;
    CHECK_OK(orMemAccessBegin(ptrs[i], sizes[i], &alone));
    CHECK(alone == hosts[i]);
    CHECK_OK(orMemAccessEnd(ptrs[i]));
  }
  CHECK(std::memcmp(hosts[1], data.data(), kPage) == 0);
  std::memset(hosts[0], 4, kPage);
  CHECK(readBack(offset(first, kPage), kPage) == std::vector<unsigned char>(kPage, 4));
  CHECK(openAccesses(first) == 2);
  CHECK(openAccesses(second) == 1);
  CHECK_OK(orMemAccessEndBatch(3, ptrs));
  CHECK(openAccesses(first) == 0);
  CHECK_ERR(orMemAccessEndBatch(3, ptrs), orErrorIllegalState);  // end without begin
  CHECK_MESSAGE_HAS("no open host access for devPtrs[0]");

  // Empty batches need no arrays.
  CHECK_OK(orMemAccessBeginBatch(0, nullptr, nullptr, nullptr));
  CHECK_OK(orMemAccessEndBatch(0, nullptr));
  CHECK_ERR(orMemAccessBeginBatch(1, ptrs, sizes, nullptr), orErrorInvalidValue);
  CHECK_ERR(orMemAccessBeginBatch(1, nullptr, sizes, hosts), orErrorInvalidValue);
  CHECK_ERR(orMemAccessEndBatch(1, nullptr), orErrorInvalidValue);

  // All or nothing: an error at any pointer leaves every count as it was,
  // and the message names the pointer.
  int local = 0;
  const void* hostPointer[] = {first, &local};
  const size_t two[] = {1, 1};
  CHECK_ERR(orMemAccessBeginBatch(2, hostPointer, two, hosts), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("devPtrs[1]");
  const void* beyond[] = {first, second, offset(second, 1)};
  const size_t tooLong[] = {1, 1, kPage};
  CHECK_ERR(orMemAccessBeginBatch(3, beyond, tooLong, hosts), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("devPtrs[2]");
  CHECK_MESSAGE_HAS("exceeds its allocation");
  CHECK(openAccesses(first) == 0);
  CHECK(openAccesses(second) == 0);

  void* hostsTwo[2] = {};
  const void* pair[] = {first, second};
  CHECK_OK(orMemAccessBeginBatch(2, pair, two, hostsTwo));
  // first is ended once too often in this batch: nothing is ended.
  const void* overEnd[] = {second, first, first};
  CHECK_ERR(orMemAccessEndBatch(3, overEnd), orErrorIllegalState);
  CHECK_MESSAGE_HAS("devPtrs[2]");
  CHECK(openAccesses(first) == 1);
  CHECK(openAccesses(second) == 1);
  // The same within one run (one allocation), which is checked and ended in
  // one update.
  const void* firstTwice[] = {first, offset(first, kPage)};
  CHECK_ERR(orMemAccessEndBatch(2, firstTwice), orErrorIllegalState);
  CHECK_MESSAGE_HAS("no open host access for devPtrs[1]");
  CHECK(openAccesses(first) == 1);
  CHECK_ERR(orMemAccessEndBatch(2, hostPointer), orErrorInvalidDevicePointer);
  CHECK(openAccesses(first) == 1);
  // A batch of one run opens and ends as many accesses as it has pointers.
  const size_t firstSizes[] = {kPage, kPage};
  CHECK_OK(orMemAccessBeginBatch(2, firstTwice, firstSizes, hostsTwo));
  CHECK(hostsTwo[1] == offset(hostsTwo[0], kPage));
  CHECK(openAccesses(first) == 3);
  CHECK_OK(orMemAccessEndBatch(2, firstTwice));
  CHECK(openAccesses(first) == 1);
  CHECK_OK(orMemAccessEndBatch(2, pair));
  CHECK_OK(orFree(second));
  // A freed pointer, after a live one.
  const void* stale[] = {first, second};
  CHECK_ERR(orMemAccessBeginBatch(2, stale, two, hostsTwo), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("not inside a live allocation");
  CHECK(openAccesses(first) == 0);
  CHECK_OK(orFree(first));

  // One batch reaches one device.
  void* onOther = nullptr;
  CHECK_OK(orSetDevice(1));
  CHECK_OK(orMalloc(&onOther, kPage));
  CHECK_OK(orSetDevice(0));
  CHECK_OK(orMalloc(&first, kPage));
  const void* twoDevices[] = {first, onOther};
  CHECK_ERR(orMemAccessBeginBatch(2, twoDevices, two, hostsTwo), orErrorInvalidValue);
  CHECK_MESSAGE_HAS("one batch reaches one device");
  CHECK_ERR(orMemAccessEndBatch(2, twoDevices), orErrorInvalidValue);
  CHECK(openAccesses(first) == 0);
  CHECK_OK(orFree(first));
  CHECK_OK(orFree(onOther));

  // Threads opening and closing batches over shared allocations.
  CHECK_OK(orMalloc(&first, kPage));
  CHECK_OK(orMalloc(&second, kPage));
  CHECK_OK(orMemcpy(second, data.data(), kPage, orMemcpyHostToDevice));
  std::atomic<int> errors{0};
  const auto worker = [&] {
    const void* operands[] = {first, second, second};
    const size_t bytes[] = {kPage, kPage, kPage};
    for (int i = 0; i < 50000; ++i) {
      void* views[3] = {};
      if (orMemAccessBeginBatch(3, operands, bytes, views) != orSuccess ||
          std::memcmp(views[2], data.data(), kPage) != 0 || orMemAccessEndBatch(3, operands) != orSuccess) {
        errors.fetch_add(1);
      }
    }
  };
  std::thread one(worker), other(worker);
  one.join();
  other.join();
  CHECK(errors.load() == 0);
  CHECK_OK(orFree(first));
  CHECK_OK(orFree(second));
}

}  // namespace openreg_test
