// Registry of orMallocHost allocations.
#pragma once

#include <cstddef>
#include <cstdint>

namespace openreg::runtime {

// True if address lies inside a live orMallocHost allocation, whose base and
// size are then stored.
bool findHostAllocation(uintptr_t address, uintptr_t* base, size_t* size);

}  // namespace openreg::runtime
