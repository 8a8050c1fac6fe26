// Synchronous copies: the four kinds, alignments of large copies, between
// devices, and overlapping ranges.
#include <algorithm>
#include <climits>

#include "harness.h"

namespace openreg_test {

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
  CHECK_ERR(orMemcpy(host.data(), data.data(), 1, orMemcpyHostToDevice), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("destination");
  CHECK_MESSAGE_HAS("is not a device pointer");
  CHECK_ERR(orMemcpy(host.data(), host.data(), 1, orMemcpyDeviceToHost), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("source");
  // Device pointer passed as the host side.
  CHECK_ERR(orMemcpy(a, b, 1, orMemcpyHostToDevice), orErrorInvalidMemcpyDirection);
  CHECK_MESSAGE_HAS("source");
  CHECK_ERR(orMemcpy(b, a, 1, orMemcpyDeviceToHost), orErrorInvalidMemcpyDirection);
  CHECK_ERR(orMemcpy(host.data(), a, 1, orMemcpyHostToHost), orErrorInvalidMemcpyDirection);
  CHECK_ERR(orMemcpy(a, host.data(), 1, orMemcpyHostToHost), orErrorInvalidMemcpyDirection);
  // Ranges past the end of the allocation, and size_t overflow.
  CHECK_ERR(orMemcpy(offset(a, kSize - 10), data.data(), 11, orMemcpyHostToDevice), orErrorInvalidDevicePointer);
  CHECK_MESSAGE_HAS("exceeds its allocation");
  char range[64];
  std::snprintf(range, sizeof range, "[%p, %p)", a, offset(a, kSize));
  CHECK_MESSAGE_HAS(range);
  CHECK_ERR(orMemcpy(host.data(), offset(b, 1), kSize, orMemcpyDeviceToHost), orErrorInvalidDevicePointer);
  CHECK_ERR(orMemcpy(b, a, kSize + 1, orMemcpyDeviceToDevice), orErrorInvalidDevicePointer);
  CHECK_ERR(orMemcpy(offset(a, 1), a, SIZE_MAX, orMemcpyDeviceToDevice), orErrorInvalidDevicePointer);
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
    for (const size_t target :
         {size_t{0}, size_t{1}, size_t{15}, size_t{64}, size_t{100}, size_t{2047}, size_t{2048}, size_t{4095}}) {
      std::memset(host, 0, kSize + kSlack);
      CHECK_OK(orMemcpy(offset(host, target), offset(device, source), kSize, orMemcpyDeviceToHost));
      const auto* bytes = static_cast<const unsigned char*>(host);
      CHECK(std::memcmp(bytes + target, data.data() + source, kSize) == 0);
      // Nothing written outside the destination range.
      CHECK(std::all_of(bytes, bytes + target, [](unsigned char b) { return b == 0; }));
      CHECK(std::all_of(bytes + target + kSize, bytes + kSize + kSlack, [](unsigned char b) { return b == 0; }));
    }
  }
  // The other directions take the same path.
  void* other = nullptr;
  CHECK_OK(orMalloc(&other, kSize + kSlack));
  CHECK_OK(orMemcpy(offset(other, 64), device, kSize, orMemcpyDeviceToDevice));
  std::vector<unsigned char> expected(data.begin(), data.begin() + kSize);
  CHECK(readBack(offset(other, 64), kSize) == expected);
  CHECK_OK(orMemcpy(offset(other, 100), offset(host, 4095), kSize, orMemcpyHostToDevice));
  CHECK(std::memcmp(readBack(offset(other, 100), kSize).data(), static_cast<unsigned char*>(host) + 4095, kSize) == 0);
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
  CHECK_ERR(orMemcpy(onZero, offset(onOne, 1), 3 * MiB + kPage, orMemcpyDeviceToDevice), orErrorInvalidDevicePointer);
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

}  // namespace openreg_test
