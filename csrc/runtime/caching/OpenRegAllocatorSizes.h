#pragma once

#include <cstddef>

#include <c10/core/AllocatorConfig.h>
#include <c10/util/llvmMathExtras.h>

// The caching allocator's size classes, CUDA's: requests round up to 512
// bytes (or to a roundup_power2_divisions step); requests up to 1 MiB are
// "small" and carved from 2 MiB segments, up to 10 MiB from 20 MiB segments,
// and larger ones get a segment of their own rounded to 2 MiB.
namespace c10::openreg {

constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = 1 << 20;
constexpr size_t kSmallBuffer = 2 << 20;
constexpr size_t kMinLargeAlloc = 10 << 20;
constexpr size_t kLargeBuffer = 20 << 20;
constexpr size_t kRoundLarge = 2 << 20;

// roundup_power2_divisions: the power-of-two interval holding `size` is cut
// into `divisions` equal steps, and the size rounds up to the next step
// (fewer distinct sizes, so cached blocks are reused more often).
inline size_t round_to_power2_division(size_t size, size_t divisions) {
  // size > kMinBlockSize * divisions, so a step is a multiple of kMinBlockSize.
  const size_t step = c10::llvm::PowerOf2Floor(size) / divisions;
  return (size + step - 1) / step * step;
}

// The block size that serves a request of `size` bytes.
inline size_t round_size(size_t size) {
  if (size < kMinBlockSize) {
    return kMinBlockSize;
  }
  const size_t divisions = c10::CachingAllocator::AcceleratorAllocatorConfig::roundup_power2_divisions(size);
  if (divisions > 1 && size > kMinBlockSize * divisions) {
    return round_to_power2_division(size, divisions);
  }
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

// The segment the runtime is asked for when no cached block fits a block of `size`.
inline size_t segment_size(size_t size) {
  if (size <= kSmallSize) {
    return kSmallBuffer;
  }
  if (size < kMinLargeAlloc) {
    return kLargeBuffer;
  }
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

}  // namespace c10::openreg
