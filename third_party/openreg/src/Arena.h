// A device's memory: one memfd mapped twice, plus the allocator of its ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace openreg::runtime {

// Bookkeeping of free byte ranges in [0, capacity). Best fit with the lowest
// offset among equal sizes; freed neighbours coalesce. O(log n) per call.
// Not thread-safe.
class RangeAllocator {
 public:
  explicit RangeAllocator(size_t capacity);

  // Offset of a newly reserved range of exactly `bytes`, or nullopt.
  std::optional<size_t> allocate(size_t bytes);
  // Returns a range obtained from allocate().
  void release(size_t offset, size_t bytes);

  size_t freeBytes() const {
    return freeBytes_;
  }
  size_t largestFreeRange() const;

 private:
  void insert(size_t offset, size_t bytes);
  void erase(std::map<size_t, size_t>::iterator range);

  std::map<size_t, size_t> byOffset_;  // offset -> size
  std::set<std::pair<size_t, size_t>> bySize_;  // (size, offset)
  size_t freeBytes_;
};

// The user view holds the addresses orMalloc hands out (PROT_NONE under memory
// protection); the host view maps the same pages read-write at a constant
// offset. Arenas live until process exit. Not thread-safe: the owning
// device's mutex guards allocate/release; the geometry is immutable.
class Arena {
 public:
  // Returns null and sets *error if the kernel refuses the memfd or mappings.
  static Arena* create(int device, size_t capacity, bool protect, std::string* error);

  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  bool contains(uintptr_t address) const {
    return address - userBase_ < capacity_;
  }
  // True if [address, address + bytes) intersects the user view.
  bool overlaps(uintptr_t address, size_t bytes) const {
    return address < userBase_ + capacity_ && (address >= userBase_ || userBase_ - address < bytes);
  }
  uintptr_t hostDelta() const {
    return hostDelta_;
  }
  uintptr_t userBase() const {
    return userBase_;
  }
  // The memfd behind both views, which orIpcGetMemHandle names to importers.
  int fd() const {
    return fd_;
  }
  size_t capacity() const {
    return capacity_;
  }

  // User address of `bytes` (a multiple of the page size), or nullopt.
  std::optional<uintptr_t> allocate(size_t bytes);
  // Returns the range to the allocator and its pages to the system.
  void release(uintptr_t userAddress, size_t bytes);

  size_t freeBytes() const {
    return ranges_.freeBytes();
  }
  size_t largestFreeRange() const {
    return ranges_.largestFreeRange();
  }

 private:
  Arena(int fd, uintptr_t userBase, uintptr_t hostBase, size_t capacity);

  const int fd_;
  const uintptr_t userBase_;
  const uintptr_t hostDelta_;  // host view address minus user view address (mod 2^64)
  const size_t capacity_;
  RangeAllocator ranges_;
};

}  // namespace openreg::runtime
