#pragma once

#include <optional>
#include <string_view>

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/QuantizerBase.h>
#include <c10/util/SmallVector.h>

#include "aten/KernelLaunch.h"

namespace at::openreg {

struct HostAccess;

// Runs CPU kernels directly on openreg memory, without copies, for every
// layout openreg holds: strided (also quantized), strided nested and sparse
// tensors.
//
// openreg device memory is host memory seen through a protected mapping. For
// one operator call, alias() turns each openreg tensor into a CPU tensor over
// the runtime's host view of the same bytes (a scoped access, open for as long
// as the CPU tensor lives); the CPU kernel then reads and writes device memory
// in place. Afterwards write_back() carries whatever the kernel did to a
// written argument's metadata or storage (resize_, set_, in-place view ops)
// back to the openreg tensor, and to_device() maps each result back:
//   - an argument's alias returned as is (in-place, out=)  -> that argument;
//   - a view of an argument's storage                      -> the same view
//                                                             of the device
//                                                             storage;
//   - a fresh CPU result                                   -> copied once
//                                                             into new device
//                                                             memory, or handed
//                                                             over if the kernel
//                                                             allocated it in
//                                                             device memory
//                                                             (HostResultAllocator.h).
//
// One instance serves one call: it deduplicates, so a tensor passed twice, or
// two tensors sharing a storage, stay the same tensor / storage on the CPU
// side, which CPU kernels' overlap checks and is_set_to rely on.
//
// It borrows the openreg tensors it aliases: the caller keeps them alive for
// as long as the instance lives (kernel arguments are). Holding a reference
// instead would be costly: a tensor that Python owns alone gets its Python
// object pinned on the first extra C++ reference, which takes the GIL, and
// released on the last, which takes it again.
//
// The host view of a dense argument (a CPU TensorImpl over its own
// StorageImpl) comes from a per-thread pool and goes back to it when the
// instance is destroyed, if nothing else holds it (HostViewPool.h). open()
// opens the accesses of a call's arguments with one runtime call, and the
// destructor closes those of all the views going back, with the host views of
// adopted results, with one more. A view that escaped the call (kept by the
// kernel, or still on the stack after an error) is left alone: its access
// closes when its last holder drops it.
class HostViews {
 public:
  // `device` receives fresh results; `op_name` names the operator in errors
  // and the kernel in profiles. Waits for the work queued on `device`'s
  // current stream (see KernelLaunch).
  HostViews(c10::Device device, std::string_view op_name);
  ~HostViews();
  HostViews(const HostViews&) = delete;
  HostViews& operator=(const HostViews&) = delete;

  // Maps the dense tensors of `device_tensors` on this instance's device to
  // pooled host views, their storages opened with one batched runtime call
  // (orMemAccessBeginBatch), so that alias() then finds them: what the
  // fallback does with a call's arguments. Other tensors are left to alias().
  void open(c10::ArrayRef<const at::Tensor*> device_tensors);
  // `written`: whether the call may change the tensor's metadata or storage
  // (an out= or in-place argument), which write_back() then carries back; it
  // looks at no other tensor's.
  at::Tensor alias(const at::Tensor& device_tensor, bool written = true);
  void write_back();
  at::Tensor to_device(const at::Tensor& host_result);

 private:
  struct StorageEntry {
    // Kept alive by `host` (its HostAccess context) or by `owned`.
    c10::StorageImpl* device;
    c10::Storage host;
    const void* host_data;  // host view address when the alias was made
    // A device copy of a storage the kernel allocated in CPU memory.
    c10::Storage owned = {};
  };
  struct TensorEntry {
    c10::TensorImpl* device;  // borrowed from the caller
    at::Tensor host;
    // The access context of a view taken from the pool, null otherwise.
    HostAccess* pooled = nullptr;
    bool written = false;
  };

  // Nested tensors (NestedHostViews.cpp): a nested tensor is a buffer
  // storage plus CPU metadata tensors, so its host counterpart is a CPU
  // nested tensor over the host view of the same storage.
  at::Tensor alias_nested(const at::Tensor& device_nested);
  at::Tensor nested_to_device(const at::Tensor& host_nested);

  // Sparse layouts (SparseHostViews.cpp): a sparse tensor owns no memory,
  // only strided component tensors, so its host counterpart is a CPU sparse
  // tensor of the same layout over the host views of its components; after
  // the kernel, replaced components, new sizes and flags are carried back.
  struct SparseEntry {
    at::Tensor device;  // held: only calls with sparse arguments pay for it
    at::Tensor host;
    // The host views of the device components, in the TensorImpl's order.
    c10::SmallVector<at::Tensor, 3> components;
    // The device components themselves, kept alive (the views borrow them)
    // after the write-back may have replaced them in `device`.
    c10::SmallVector<at::Tensor, 3> device_components;
  };
  at::Tensor alias_sparse(const at::Tensor& device_sparse);
  void write_back_sparse();
  at::Tensor sparse_to_device(const at::Tensor& host_sparse);

  // Quantized tensors (QuantizedHostViews.cpp): a QTensorImpl over the host
  // view of the same storage, with the device tensor's quantizer (a
  // per-channel one with host views of its scales and zero points); after the
  // kernel, a quantizer the kernel replaced is carried back.
  struct QuantizedEntry {
    c10::TensorImpl* device;  // borrowed, like TensorEntry::device
    c10::TensorImpl* host;  // kept alive by its TensorEntry
    at::QuantizerPtr host_quantizer;  // the one alias() set
  };
  struct QuantizerPair {
    at::QuantizerPtr device;
    at::QuantizerPtr host;
  };
  at::Tensor alias_quantized(const at::Tensor& device_quantized);
  void write_back_quantized();
  at::Tensor quantized_to_device(const at::Tensor& host_quantized);
  at::QuantizerPtr host_quantizer_for(const at::QuantizerPtr& device_quantizer);
  at::QuantizerPtr device_quantizer_for(const at::QuantizerPtr& host_quantizer);

  c10::Storage host_storage_for(const c10::Storage& device_storage);
  TensorEntry* find(const c10::TensorImpl* device_impl);
  // Pooled host views of those of the dense `device_tensors` that can have
  // one (see open()); the others are left to a fresh view.
  void take_pooled_views(c10::ArrayRef<const at::Tensor*> device_tensors);
  // Closes the accesses of the pooled views going back and of the adopted
  // results with one batch per device, and gives the views back.
  void return_pooled_views() noexcept;
  // A fresh dense result the kernel allocated in device memory
  // (HostResultAllocator.h) and nothing else holds becomes the device tensor
  // itself: its storage takes the device memory and its TensorImpl the
  // device's dispatch keys, instead of a device TensorImpl and StorageImpl
  // being built and the host ones torn down. Its host view's access is closed
  // with the pooled views' (adopted_).
  bool adopt_device_result(const at::Tensor& host_result);
  // The device storage behind a CPU storage seen after the kernel ran.
  c10::StorageImpl* device_storage_for(const c10::Storage& host_storage);
  void write_back(StorageEntry& entry);

  // First, so the kernel's record covers everything until the accesses close.
  KernelLaunch launch_;
  c10::Device device_;
  std::string_view op_name_;
  c10::SmallVector<StorageEntry, 4> storages_;
  c10::SmallVector<TensorEntry, 4> tensors_;
  c10::SmallVector<SparseEntry, 1> sparse_;
  c10::SmallVector<QuantizedEntry, 1> quantized_;
  c10::SmallVector<QuantizerPair, 1> quantizers_;
  // The access contexts of adopted results' host views, still open; each
  // keeps its device storage alive until the access is closed.
  c10::SmallVector<HostAccess*, 1> adopted_;
};

// The allocator of alias storages: device memory of the current device,
// returned as the runtime's host view of it (a scoped access, open while the
// CPU storage holds it). HostViews::write_back and to_device hand such memory
// to the device without a copy.
c10::Allocator* device_backed_host_allocator();

// The lighter form, for kernels that need addresses rather than tensors: the
// host address of an openreg tensor's data, valid until close() or
// destruction (one scoped access per storage). TensorIterator kernels whose
// iterator was built over the openreg tensors themselves use it to point the
// iterator's operands at the host view (see StubKernels.cpp), which saves
// building a CPU tensor per operand.
//
// The kernel launch (the wait for `device`'s current stream and the profiler
// record, see KernelLaunch) starts with the first access opened, so that a
// kernel that turns out to need the host path (HostViews, which launches on
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

  c10::Device device_;
  std::string_view op_name_;
  std::optional<KernelLaunch> launch_;
  // The open storages' device and host base addresses, pairwise, in opening
  // order; the device ones are what orMemAccessEndBatch closes. A storage
  // appears once per operand when a kernel's operands open it (addresses()).
  c10::SmallVector<const void*, 4> device_bases_;
  c10::SmallVector<char*, 4> host_bases_;
  // Once more than a few are open (a foreach kernel holds hundreds), their
  // slots sorted by device address, for find(); a kernel's few operands are
  // searched linearly.
  c10::SmallVector<uint32_t, 4> sorted_slots_;
};

} // namespace at::openreg
