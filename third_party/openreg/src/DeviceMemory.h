// Lookup of live device allocations, shared by the memory and copy entry
// points, and the writers' updates of the table they are found in.
//
// Readers (copies, scoped accesses, attribute queries) take no lock: inside a
// ReadSection they load the device's current AllocationTable and search it.
// Writers, holding the device's mutex, publish a new table. An allocation
// that orFree removes is first marked released (Allocation::uses), so no new
// use of it can start, then unpublished; orFree returns, and the range can be
// reused, only after waitForReaders(): no copy that found it is still running.
#pragma once

#include <iterator>
#include <cstddef>
#include <cstdint>

#include "Device.h"
#include "openreg.h"

namespace openreg::runtime {

// Inside a ReadSection: the device's allocations (empty if none), valid until
// the section ends.
inline const AllocationTable* currentAllocations(const Device& device) {
  static const AllocationTable kNone;
  const AllocationTable* table = device.allocations.load(std::memory_order_acquire);
  return table != nullptr ? table : &kNone;
}

// Whether the allocation at base holds the whole of [address, address + bytes).
inline bool holds(const Allocation& allocation, uintptr_t base, uintptr_t address, size_t bytes) {
  const uintptr_t offset = address - base;
  return offset < allocation.size && bytes <= allocation.size - offset;
}

// The allocation of table that contains address and the whole of
// [address, address + bytes), storing its base in *base; null, recording
// nothing, if there is none.
// Inline: on the path of every scoped access and copy.
inline Allocation* lookupAllocation(const AllocationTable& table, uintptr_t address, size_t bytes, uintptr_t* base) {
  const auto next = table.after(address);
  if (next == table.entries.begin())
    return nullptr;
  const AllocationTable::Entry& entry = *std::prev(next);
  if (!holds(*entry.allocation, entry.base, address, bytes))
    return nullptr;
  *base = entry.base;
  return entry.allocation;
}

// The same, but a miss records an orErrorInvalidDevicePointer message, which
// names the calling context and the pointer's role.
Allocation* findAllocation(
    const Device& device, const AllocationTable& table, uintptr_t address, size_t bytes, const char* context,
    const char* role, uintptr_t* base);

// Records that the pointer is not inside a live allocation (also said of one
// whose allocation orFree released while the caller was looking it up) and
// returns orErrorInvalidDevicePointer.
orError_t notInsideAllocation(const Device& device, uintptr_t address, const char* context, const char* role);

// With device.mutex held: publishes the table with allocation added at base.
void insertAllocation(Device& device, uintptr_t base, Allocation* allocation);

// With device.mutex held, for an allocation the caller has marked released:
// publishes the table without it, waits until no reader can still use it,
// and deletes it.
void removeAllocation(Device& device, uintptr_t base);

}  // namespace openreg::runtime
