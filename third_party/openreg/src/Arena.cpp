#include "Arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>

namespace openreg::runtime {

RangeAllocator::RangeAllocator(size_t capacity) : freeBytes_(0) {
  insert(0, capacity);
}

std::optional<size_t> RangeAllocator::allocate(size_t bytes) {
  const auto fit = bySize_.lower_bound({bytes, 0});
  if (fit == bySize_.end())
    return std::nullopt;
  const auto [size, offset] = *fit;
  erase(byOffset_.find(offset));
  if (size > bytes)
    insert(offset + bytes, size - bytes);
  return offset;
}

void RangeAllocator::release(size_t offset, size_t bytes) {
  auto next = byOffset_.lower_bound(offset);
  if (next != byOffset_.begin()) {
    const auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      offset = previous->first;
      bytes += previous->second;
      erase(previous);
    }
  }
  if (next != byOffset_.end() && offset + bytes == next->first) {
    bytes += next->second;
    erase(next);
  }
  insert(offset, bytes);
}

size_t RangeAllocator::largestFreeRange() const {
  return bySize_.empty() ? 0 : bySize_.rbegin()->first;
}

void RangeAllocator::insert(size_t offset, size_t bytes) {
  byOffset_.emplace(offset, bytes);
  bySize_.emplace(bytes, offset);
  freeBytes_ += bytes;
}

void RangeAllocator::erase(std::map<size_t, size_t>::iterator range) {
  bySize_.erase({range->second, range->first});
  freeBytes_ -= range->second;
  byOffset_.erase(range);
}

Arena* Arena::create(int device, size_t capacity, bool protect, std::string* error) {
  // Describes errno; called before any cleanup that could change it.
  const auto describe = [&](const char* step) {
    *error = "cannot create the memory arena of device " + std::to_string(device) + " (" + std::to_string(capacity) +
        " bytes): " + step + ": " + std::strerror(errno);
  };
  const std::string name = "openreg-device-" + std::to_string(device);
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    describe("memfd_create");
    return nullptr;
  }
  if (ftruncate(fd, static_cast<off_t>(capacity)) != 0) {
    describe("ftruncate");
    close(fd);
    return nullptr;
  }
  // MAP_NORESERVE: the file is sparse and only touched pages cost memory.
  const int flags = MAP_SHARED | MAP_NORESERVE;
  void* user = mmap(nullptr, capacity, protect ? PROT_NONE : PROT_READ | PROT_WRITE, flags, fd, 0);
  if (user == MAP_FAILED) {
    describe("mmap of the user view");
    close(fd);
    return nullptr;
  }
  void* host = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (host == MAP_FAILED) {
    describe("mmap of the host view");
    munmap(user, capacity);
    close(fd);
    return nullptr;
  }
  return new Arena(fd, reinterpret_cast<uintptr_t>(user), reinterpret_cast<uintptr_t>(host), capacity);
}

Arena::Arena(int fd, uintptr_t userBase, uintptr_t hostBase, size_t capacity)
    : fd_(fd), userBase_(userBase), hostDelta_(hostBase - userBase), capacity_(capacity), ranges_(capacity) {}

std::optional<uintptr_t> Arena::allocate(size_t bytes) {
  const std::optional<size_t> offset = ranges_.allocate(bytes);
  if (!offset)
    return std::nullopt;
  return userBase_ + *offset;
}

void Arena::release(uintptr_t userAddress, size_t bytes) {
  const size_t offset = userAddress - userBase_;
  // Punching drops the pages from the memfd (and so from both views): RSS
  // does not grow across alloc/free cycles, and reused memory reads as zero.
  // It cannot fail for a page-aligned range inside a memfd.
  fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset), static_cast<off_t>(bytes));
  ranges_.release(offset, bytes);
}

}  // namespace openreg::runtime
