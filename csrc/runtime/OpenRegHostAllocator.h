#pragma once

#include <c10/core/Allocator.h>

namespace c10::openreg {

// Page-locked host memory from the runtime (orMallocHost), used for
// pin_memory() while openreg is the current accelerator.
c10::Allocator* getHostAllocator();

} // namespace c10::openreg
