#pragma once

#include <optional>
#include <string_view>

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <c10/util/flat_hash_map.h>

#include "aten/KernelLaunch.h"

namespace at::openreg {

// The lighter form of CpuAliases (CpuAliases.h), for kernels that need
// addresses rather than tensors: the host address of an openreg tensor's
// data, valid until close() or destruction (one scoped access per storage). TensorIterator kernels whose
// iterator was built over the openreg tensors themselves use it to point the
// iterator's operands at the host view (see StubKernels.cpp), which saves
// building a CPU tensor per operand.
//
// The kernel launch (the wait for `device`'s current stream and the profiler
// record, see KernelLaunch) starts with the first access opened, so that a
// kernel that turns out to need the host path (CpuAliases, which launches on
// its own) can close() this one first instead of nesting two launches.
class HostAddresses {
 public:
  // `op_name` names the operator in errors and profiles.
  HostAddresses(c10::Device device, std::string_view op_name);
  ~HostAddresses();
  HostAddresses(const HostAddresses&) = delete;
  HostAddresses& operator=(const HostAddresses&) = delete;

  // host[i] receives the address of device_tensors[i]'s data (null for a
  // storage without bytes). The storages not open yet are opened with one
  // batched runtime call (orMemAccessBeginBatch): a kernel's operands,
  // usually carved from one device allocation, cost one lookup and one
  // atomic update.
  void addresses(c10::ArrayRef<const at::TensorBase*> device_tensors, void** host);
  void* address(const at::TensorBase& device_tensor);
  // Points every openreg operand of `iter` at the host view of its memory
  // (TensorIteratorBase::unsafe_replace_operand), so that a CPU loop run on
  // the iterator reads and writes device memory through host access.
  void point_at_host(at::TensorIteratorBase& iter);
  // Opens the storages of every openreg tensor of `lists` with one batched
  // call, ahead of the addresses() calls that then find them open: a foreach
  // kernel's whole argument lists (ForeachKernels.cpp).
  void open(c10::ArrayRef<at::TensorList> lists);
  // Ends the accesses and the kernel launch; a later addresses() starts anew.
  void close() noexcept;

 private:
  // The storage of an openreg operand, checked to hold all of its bytes.
  const c10::StorageImpl* storage_of(const at::TensorBase& device_tensor) const;
  // Opens the storages of `device_tensors` not open yet, each once.
  void open_storages(c10::ArrayRef<const at::TensorBase*> device_tensors);
  // Opens the `count` storages appended after the first `open` (their sizes
  // in bytes), with one runtime call; all or none.
  void begin(size_t open, const size_t* sizes, size_t count);
  // The slot of an open storage, by device base address; -1 if not open.
  ptrdiff_t find(const void* device_base) const;
  // Appends a storage to open, and to the index once there is one.
  void append(const void* device_base);

  c10::Device device_;
  std::string_view op_name_;
  std::optional<KernelLaunch> launch_;
  // The open storages' device and host base addresses, pairwise, in opening
  // order; the device ones are what orMemAccessEndBatch closes. A storage
  // appears once per operand when a kernel's operands open it (addresses()).
  c10::SmallVector<const void*, 4> device_bases_;
  c10::SmallVector<char*, 4> host_bases_;
  // Once more than a few are open (a foreach kernel holds hundreds), their
  // slots by device address, for find(); a kernel's few operands are searched
  // linearly.
  ska::flat_hash_map<const void*, size_t> slots_;
};

}  // namespace at::openreg
