// The registry of device memory imported from other processes (orIpc*), as
// the address lookups in Device.h need it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace openreg::runtime {

struct Device;

// Ranges currently open through orIpcOpenMemHandle in this process. Lookups
// consult the registry only when it is not 0, so processes that import
// nothing pay one relaxed load on their (rare) lookup misses.
extern std::atomic<size_t> importedRangeCount;

inline bool anyImports() {
  return importedRangeCount.load(std::memory_order_acquire) != 0;
}

// The device an imported range containing address was opened on, or null.
Device* deviceOfImport(uintptr_t address);
// True if [address, address + bytes) intersects an imported range.
bool overlapsImport(uintptr_t address, size_t bytes);

}  // namespace openreg::runtime
