// Lookup of live device allocations, shared by the memory and copy entry points.
#pragma once

#include <cstddef>
#include <cstdint>

#include "Device.h"

namespace openreg::runtime {

// With device.mutex held (shared suffices): the live allocation that contains
// address and the whole of [address, address + bytes), storing its base in
// *base. Otherwise records an orErrorInvalidDevicePointer message, which
// names the calling context and the pointer's role, and returns null.
Allocation* findAllocation(Device& device, uintptr_t address, size_t bytes, const char* context,
                           const char* role, uintptr_t* base);

}  // namespace openreg::runtime
