#pragma once

#include <optional>
#include <string_view>
#include <type_traits>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/QuantizerBase.h>
#include <c10/util/SmallVector.h>

#include "aten/KernelLaunch.h"

namespace at::openreg {

class DeviceCall;
struct ScopedHostAccess;

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
//   - an argument's alias returned as is (in-place, out=): that argument;
//   - a view of an argument's storage: the same view of the device storage;
//   - a fresh CPU result: copied once into new device memory, or handed over
//     if the kernel allocated it in device memory (CpuAllocationsOnDevice.h).
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
// instance is destroyed, if nothing else holds it (CpuAliasPool.h). open()
// opens the accesses of a call's arguments with one runtime call, and the
// destructor closes those of all the views going back, with the host views of
// adopted results, with one more. A view that escaped the call (kept by the
// kernel, or still on the stack after an error) is left alone: its access
// closes when its last holder drops it.
class CpuAliases {
 public:
  // `device` receives fresh results; `op_name` names the operator in errors
  // and the kernel in profiles. Waits for the work queued on `device`'s
  // current stream (see KernelLaunch).
  CpuAliases(c10::Device device, std::string_view op_name);
  // For a kernel that runs CPU code on openreg memory: the device and
  // operator name of its DeviceCall (DeviceCall.h).
  explicit CpuAliases(const DeviceCall& call);
  ~CpuAliases();
  CpuAliases(const CpuAliases&) = delete;
  CpuAliases& operator=(const CpuAliases&) = delete;

  // Maps the dense tensors of `device_tensors` on this instance's device to
  // pooled host views, their storages opened with one batched runtime call
  // (orMemAccessBeginBatch), so that alias() then finds them: what the
  // fallback does with a call's arguments. Other tensors are left to alias().
  void open(c10::ArrayRef<const at::Tensor*> device_tensors);
  // An openreg tensor's alias; CPU and undefined tensors pass through.
  // `written`: whether the call may change the tensor's metadata or storage
  // (an out= or in-place argument), which write_back() then carries back; it
  // looks at no other tensor's.
  at::Tensor alias(const at::Tensor& tensor, bool written = true);
  // Any kernel argument: tensors as alias(), the rest passes through.
  template <typename T>
  decltype(auto) argument(const T& value) {
    if constexpr (std::is_same_v<T, at::Tensor>) {
      return alias(value);
    } else {
      return (value);
    }
  }
  // The CPU generator behind `generator` (the device's default one if none);
  // a generator of another device raises, as on CUDA.
  std::optional<at::Generator> generator(const std::optional<at::Generator>& generator) const;
  void write_back();
  at::Tensor to_device(const at::Tensor& host_result);

 private:
  struct StorageEntry {
    // Kept alive by `host` (its ScopedHostAccess context) or by `owned`.
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
    ScopedHostAccess* pooled = nullptr;
    bool written = false;
  };

  // Nested tensors (NestedCpuAliases.cpp): a nested tensor is a buffer
  // storage plus CPU metadata tensors, so its host counterpart is a CPU
  // nested tensor over the host view of the same storage.
  at::Tensor alias_nested(const at::Tensor& device_nested);
  at::Tensor nested_to_device(const at::Tensor& host_nested);

  // Sparse layouts (SparseCpuAliases.cpp): a sparse tensor owns no memory,
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

  // Quantized tensors (QuantizedCpuAliases.cpp): a QTensorImpl over the host
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
  // (CpuAllocationsOnDevice.h) and nothing else holds becomes the device tensor
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
  c10::SmallVector<ScopedHostAccess*, 1> adopted_;
};

// The allocator of alias storages: device memory of the current device,
// returned as the runtime's host view of it (a scoped access, open while the
// CPU storage holds it). CpuAliases::write_back and to_device hand such memory
// to the device without a copy.
c10::Allocator* device_backed_host_allocator();

}  // namespace at::openreg
