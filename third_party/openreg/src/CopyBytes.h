// The byte copy behind every orMemcpy / orMemcpyAsync.
#pragma once

#include <cstddef>

namespace openreg::runtime {

// Copies `count` bytes; the ranges may overlap. Equivalent to memmove, but
// large disjoint copies whose destination sits a little ahead of the source
// modulo 4 KiB are done backwards with non-temporal stores: forward copies at
// such offsets stall on 4K aliasing (a load that matches an earlier store's
// page offset waits for it), which costs glibc's memcpy 3-4x its bandwidth.
// Device allocations are page-aligned and host buffers often start 64 bytes
// into a page, so device-to-host copies hit exactly that case.
void copyBytes(void* dst, const void* src, size_t count);

}  // namespace openreg::runtime
