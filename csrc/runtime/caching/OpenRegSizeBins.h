#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include <c10/core/Stream.h>

#include "runtime/caching/OpenRegAllocatorSizes.h"
#include "runtime/caching/OpenRegBlockPool.h"

// The device cache's fast path: freed small blocks wait here, per stream and
// by exact size, before they are merged with their neighbours and ordered in
// the pool's set. A request of the same size on the same stream (the common
// case: a loop allocating the same shapes) takes one back without a tree
// search, a split, a merge or a node allocation, so an allocate/free pair
// costs about what malloc/free does.
//
// The bins are a deferral, not a second cache: a binned block is free (its
// allocated and active statistics are already released) and belongs to the
// default small pool of its segment; the device cache settles the bins (each
// block merged into the pool as CUDA would have merged it at free time) before
// anything looks at the pool as a whole: a miss, empty_cache, an out-of-memory
// retry, garbage collection, statistics and snapshots. Guarded by the device
// cache's mutex like the rest of it.
namespace c10::openreg {

class SizeBins {
 public:
  // The largest block binned: the sizes a loop over small tensors repeats
  // (32 classes). Larger freed blocks merge at once: their exact sizes
  // rarely come back, and binned they would keep free ranges apart until a
  // miss settles the bins (on mixed 16 B-1 MiB churn, 64 KiB and 256 KiB
  // limits cost more per call than 16 KiB; 4 KiB too little).
  static constexpr size_t kMaxSize = 16 << 10;
  // Bytes held unmerged at most; past it a freed block takes the merging path.
  static constexpr size_t kCapacity = 16 << 20;

  // Takes a freed block of the default small pool, unless the bins are full.
  // Called from deleters: never throws (false when a new stream's bins
  // cannot be allocated).
  bool push(Block* block) noexcept {
    if (block->size > kMaxSize || block->size % kMinBlockSize != 0 || bytes_ + block->size > kCapacity) {
      return false;
    }
    std::array<Block*, kBins>* bins = bins_of(block->stream);
    if (bins == nullptr) {
      return false;
    }
    Block*& head = (*bins)[index(block->size)];
    block->next_binned = head;
    head = block;
    bytes_ += block->size;
    return true;
  }

  // A binned block of exactly `size` bytes freed on `stream`, or nullptr.
  Block* pop(c10::Stream stream, size_t size) {
    if (bytes_ == 0 || size > kMaxSize) {
      return nullptr;
    }
    for (StreamBins& bins : streams_) {
      if (bins.stream == stream) {
        Block*& head = bins.heads[index(size)];
        Block* block = head;
        if (block != nullptr) {
          head = block->next_binned;
          block->next_binned = nullptr;
          bytes_ -= block->size;
        }
        return block;
      }
    }
    return nullptr;
  }

  bool empty() const {
    return bytes_ == 0;
  }

  // Empties the bins, handing each block to fn.
  template <typename Fn>
  void drain(Fn fn) {
    if (bytes_ == 0) {
      return;
    }
    for (StreamBins& bins : streams_) {
      for (Block*& head : bins.heads) {
        while (head != nullptr) {
          Block* block = head;
          head = block->next_binned;
          block->next_binned = nullptr;
          fn(block);
        }
      }
    }
    bytes_ = 0;
  }

 private:
  static constexpr size_t kBins = kMaxSize / kMinBlockSize;

  // Blocks of a small pool are multiples of kMinBlockSize.
  static size_t index(size_t size) {
    return size / kMinBlockSize - 1;
  }

  struct StreamBins {
    explicit StreamBins(c10::Stream stream) : stream(stream) {}
    c10::Stream stream;
    std::array<Block*, kBins> heads{};
  };

  std::array<Block*, kBins>* bins_of(c10::Stream stream) noexcept {
    for (StreamBins& bins : streams_) {
      if (bins.stream == stream) {
        return &bins.heads;
      }
    }
    try {
      return &streams_.emplace_back(stream).heads;
    } catch (...) {
      return nullptr;
    }
  }

  // A program uses few streams: a linear search finds the default first.
  std::vector<StreamBins> streams_;
  size_t bytes_ = 0;
};

}  // namespace c10::openreg
