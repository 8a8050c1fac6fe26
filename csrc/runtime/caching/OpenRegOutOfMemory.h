#pragma once

#include <cstddef>

#include <c10/core/CachingDeviceAllocator.h>

// The caching allocator's out-of-memory error: torch.OutOfMemoryError with
// CUDA's message (the request, the device's capacity and free memory, what
// PyTorch has allocated and reserved), and what to change.
namespace c10::openreg {

// What the device cache knows when a segment cannot be had. `size` is the
// rounded request: past the memory fraction, that is what the fraction could
// not hold, and the runtime itself was never asked.
struct OutOfMemoryContext {
  c10::DeviceIndex device;
  size_t requested;
  size_t size;
  const c10::CachingDeviceAllocator::DeviceStats& stats;
  double memory_fraction;
  size_t allowed_bytes;
};

// Raises torch.OutOfMemoryError. Call it on the thread whose orMalloc failed:
// the message carries the runtime's detail of that failure.
[[noreturn]] void raise_out_of_memory(const OutOfMemoryContext& context);

}  // namespace c10::openreg
