// Lookup of live device allocations, shared by the memory and copy entry points.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "Device.h"

namespace openreg::runtime {

// With device.mutex held (shared suffices): the live allocation that contains
// address and the whole of [address, address + bytes), storing its base in
// *base; null, recording nothing, if there is none.
// Inline: on the path of every scoped access and copy.
inline Allocation* lookupAllocation(Device& device, uintptr_t address, size_t bytes,
                                    uintptr_t* base) {
  const auto next = device.allocations.upper_bound(address);
  if (next == device.allocations.begin()) return nullptr;
  auto& [start, allocation] = *std::prev(next);
  if (address - start >= allocation.size || bytes > allocation.size - (address - start)) {
    return nullptr;
  }
  *base = start;
  return &allocation;
}

// The same, but a miss records an orErrorInvalidDevicePointer message, which
// names the calling context and the pointer's role.
Allocation* findAllocation(Device& device, uintptr_t address, size_t bytes, const char* context,
                           const char* role, uintptr_t* base);

}  // namespace openreg::runtime
