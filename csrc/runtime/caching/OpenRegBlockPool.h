#pragma once

#include <cstddef>
#include <cstdint>
#include <set>

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>
#include <c10/util/flat_hash_map.h>

// The caching allocator's data structures, CUDA's: a segment is one runtime
// allocation, cut into blocks linked to their neighbours; free blocks wait in
// a block pool (small or large) of the device, or of a private pool
// (MemPool), ordered so that the smallest fitting block of a stream is found
// in one lookup.
namespace c10::openreg {

struct BlockPool;

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  size_t requested_size = 0;
  c10::Stream stream;
  BlockPool* pool = nullptr;
  bool allocated = false;
  // Neighbours within the same segment (nullptr at its ends).
  Block* prev = nullptr;
  Block* next = nullptr;
  // In its pool's set of cached blocks (not allocated, not awaiting events).
  bool cached = false;
  // Allocated while at least max_split_size (counted in oversize_allocations
  // until freed, whatever the setting is by then).
  bool oversize = false;
  // When it entered the cache (a per-device counter): garbage collection
  // returns the longest-cached segments first.
  uint64_t cached_at = 0;
  // The next block of its size bin (OpenRegSizeBins.h), while freed there.
  Block* next_binned = nullptr;
  // Streams other than `stream` that used the block (record_stream).
  ska::flat_hash_set<c10::Stream> stream_uses;

  Block(void* ptr, size_t size, c10::Stream stream, BlockPool* pool)
      : ptr(ptr), size(size), stream(stream), pool(pool) {}

  bool is_split() const {
    return prev != nullptr || next != nullptr;
  }

  // Addresses key segments and history entries.
  size_t address() const {
    return reinterpret_cast<size_t>(ptr);
  }
};

// Free blocks, ordered so that lower_bound finds the smallest block of a
// stream that fits.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) {
      return a->stream.id() != b->stream.id() ? a->stream.id() < b->stream.id()
                                              : a->stream.device_index() < b->stream.device_index();
    }
    if (a->size != b->size) {
      return a->size < b->size;
    }
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};

struct PrivatePool;

struct BlockPool {
  explicit BlockPool(bool small, PrivatePool* owner = nullptr) : is_small(small), owner(owner) {}
  std::set<Block*, BlockOrder> blocks;
  const bool is_small;
  PrivatePool* const owner;  // nullptr for the device's default pool
};

// The blocks of one memory pool (OpenRegMemPool.h) on one device.
struct PrivatePool {
  PrivatePool(c10::MempoolId_t id, bool no_split) : id(id), no_split(no_split) {}
  const c10::MempoolId_t id;
  const bool no_split;  // MemPool(no_split=True): a segment serves one allocation
  BlockPool small{true, this};
  BlockPool large{false, this};
  int use_count = 0;  // MemPool objects and active use_mem_pool contexts
  size_t segments = 0;  // held from the runtime
};

}  // namespace c10::openreg
