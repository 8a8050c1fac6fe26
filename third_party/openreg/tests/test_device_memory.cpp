// Device memory: allocation, out of memory, coalescing of free ranges, pages
// returned on free, pinned host memory, and allocation from many threads. The
// small-arena tests run in forked children.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <random>

#include "harness.h"

namespace openreg_test {

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
    for (void*& page : pages)
      CHECK_OK(orMalloc(&page, kPage));
    for (size_t i = 0; i < pages.size(); i += 2)
      CHECK_OK(orFree(pages[i]));
    CHECK(freeBytes() == 32 * KiB);
    CHECK_ERR(orMalloc(&ptr, 2 * kPage), orErrorMemoryAllocation);
    CHECK_MESSAGE_HAS("32768 bytes free");
    CHECK_MESSAGE_HAS("largest free range 4096 bytes");
    for (size_t i = 1; i < pages.size(); i += 2)
      CHECK_OK(orFree(pages[i]));
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
      for (void*& block : blocks)
        CHECK_OK(orMalloc(&block, 16 * KiB));
      CHECK(freeBytes() == 0);
      for (int i : order)
        CHECK_OK(orFree(blocks[i]));
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
    CHECK_ERR(orMemcpy(straddling, host.data(), host.size(), orMemcpyHostToDevice), orErrorInvalidDevicePointer);
    CHECK_MESSAGE_HAS("exceeds its allocation");
    CHECK_ERR(orMemcpy(host.data(), straddling, host.size(), orMemcpyDeviceToHost), orErrorInvalidDevicePointer);
    CHECK_ERR(orMemcpy(straddling, second, host.size(), orMemcpyDeviceToDevice), orErrorInvalidDevicePointer);
    CHECK_ERR(
        orMemcpyAsync(straddling, host.data(), host.size(), orMemcpyHostToDevice, nullptr),
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
      {1, kPage}, {kPage - 1, kPage}, {kPage, kPage}, {kPage + 1, 2 * kPage}, {MiB + 3, MiB + kPage}};
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
  for (void* block : live)
    CHECK_OK(orFree(block));
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
    if (i == 0)
      first = ptr;
    sameAddress = sameAddress && ptr == first;
    // Touch every page now and then: the resident set must grow, then shrink
    // back once the block is freed.
    if (i % 100 == 0) {
      void* host = nullptr;
      CHECK_OK(orMemAccessBegin(ptr, kBlock, &host));
      for (size_t page = 0; page < kBlock; page += kPage)
        static_cast<char*>(host)[page] = 1;
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
      if (!ok)
        errors.fetch_add(1);
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
        if (&to == &from)
          continue;
        const size_t count = std::min(to.size, from.size);
        expect(orMemcpy(to.ptr, from.ptr, count, orMemcpyDeviceToDevice) == orSuccess);
        std::vector<unsigned char> expected = pattern(to.size, to.seed);
        const std::vector<unsigned char> copied = pattern(from.size, from.seed);
        std::memcpy(expected.data(), copied.data(), count);
        std::vector<unsigned char> actual(to.size);
        expect(orMemcpy(actual.data(), to.ptr, to.size, orMemcpyDeviceToHost) == orSuccess);
        expect(actual == expected);
        expect(orMemcpy(to.ptr, pattern(to.size, to.seed).data(), to.size, orMemcpyHostToDevice) == orSuccess);
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
    for (const Block& block : blocks)
      expect(orFree(block.ptr) == orSuccess);
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id)
    threads.emplace_back(worker, id);
  for (std::thread& thread : threads)
    thread.join();
  CHECK(errors.load() == 0);
  for (int device : {0, 1}) {
    CHECK_OK(orSetDevice(device));
    CHECK(freeBytes() == initial[device]);
  }
  CHECK_OK(orSetDevice(0));
}

}  // namespace openreg_test
