// Lookup of live device allocations, shared by the memory and copy entry points.
#pragma once

#include <cstddef>
#include <cstdint>

#include "Device.h"

namespace openreg::runtime {

// With device.mutex held (shared suffices): the live allocation that contains
// address and the whole of [address, address + bytes), storing its base in
// *base; null, recording nothing, if there is none.
Allocation* lookupAllocation(Device& device, uintptr_t address, size_t bytes, uintptr_t* base);

// The same, but a miss records an orErrorInvalidDevicePointer message, which
// names the calling context and the pointer's role.
Allocation* findAllocation(Device& device, uintptr_t address, size_t bytes, const char* context,
                           const char* role, uintptr_t* base);

}  // namespace openreg::runtime
