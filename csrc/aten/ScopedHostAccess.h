#pragma once

#include <cstddef>

#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>

namespace at::openreg {

// The context of a CPU DataPtr that points into the runtime's host view of
// device memory (a scoped access, CpuAliases.h). Destroying the DataPtr closes
// the access, then drops what kept the device memory alive.
struct ScopedHostAccess {
  const void* device_ptr = nullptr;
  // Device memory this view owns: set when a CPU kernel grew an argument.
  c10::DataPtr owned;
  // The device storage this view reads: set for argument aliases, and after
  // `owned` was handed over to the device storage.
  c10::intrusive_ptr<c10::StorageImpl> keep_alive;
};

// The deleters of such DataPtrs: both close the access and free the context.
// A pooled view's storage (CpuAliasPool.h) carries the second, which tells
// the pool that the DataPtr is still the one it installed: every other host
// view DataPtr (the kernel grew the storage, say) carries the first.
void close_host_access(void* context);
void close_pooled_host_access(void* context);

// A host view of `nbytes` of device memory at `device_ptr` (null for a
// storage without bytes).
c10::DataPtr open_host_access(
    const void* device_ptr, size_t nbytes, c10::DataPtr owned, c10::intrusive_ptr<c10::StorageImpl> keep_alive);

// The same host view with its host address as context, as raw_allocate()
// requires of the DataPtrs it releases (oneDNN takes its buffers that way):
// raw_deallocate() hands back the address alone, so the access is found by
// address. Its deleter, or close_addressed_host_access, closes it.
c10::DataPtr address_host_access(c10::DataPtr view);
bool is_addressed_host_access(const c10::DataPtr& data);

// Closes the addressed host access at `host`; false if there is none. Never
// throws, and in a child forked after openreg started (which owns none of
// the parent's device memory) takes no lock and closes nothing.
bool close_addressed_host_access(void* host) noexcept;

// The access of a host view DataPtr that owns device memory, or null.
ScopedHostAccess* owning_host_access(const c10::DataPtr& data);

// Takes the access out of a host view DataPtr, whose deleter then no longer
// closes it: the caller closes it.
ScopedHostAccess* release_host_access(c10::DataPtr& data);

// Ends scoped accesses from a deleter or destructor, which must not throw:
// a failure is reported on stderr.
void end_accesses(size_t count, const void* const* device_ptrs) noexcept;

}  // namespace at::openreg
