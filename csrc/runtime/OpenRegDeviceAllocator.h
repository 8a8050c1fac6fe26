#pragma once

#include <c10/core/CachingDeviceAllocator.h>

namespace c10::openreg {

// The allocator behind every openreg tensor (registered for PrivateUse1, so
// torch.accelerator.memory.* reads its statistics). Deleters run with or
// without the GIL held by the caller and never touch Python.
c10::DeviceAllocator* getDeviceAllocator();

} // namespace c10::openreg
