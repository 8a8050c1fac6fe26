#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace c10::openreg {

// Pinned (page-locked) host memory for openreg, cached by PyTorch's
// CachingHostAllocator machinery: pin_memory(), DataLoader(pin_memory=True)
// and the source of asynchronous host-to-device copies. A block used by a
// copy queued on a stream is reused only after that stream passes the copy.
at::HostAllocator* getHostAllocator();

}  // namespace c10::openreg
