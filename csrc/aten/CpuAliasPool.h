#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include "aten/ScopedHostAccess.h"

namespace at::openreg {

// Host views kept for reuse, so that a fallback call does not build and tear
// down a CPU TensorImpl, its StorageImpl and an access context per dense
// argument (CpuAliases.h). One pool per thread: no lock, and a view is never
// shared between two calls running at once.
//
// A pooled view is a CPU TensorImpl over a StorageImpl of its own, plus the
// access context its DataPtr carries while in use. In the pool the storage
// holds a null data pointer and no bytes, so a view kept by the pool gives no
// access to device memory; CpuAliases installs the host view of the device
// memory (with close_pooled_host_access as deleter) and the tensor's dtype,
// sizes and strides for one call.
struct PooledCpuAlias {
  at::Tensor tensor;
  ScopedHostAccess* access = nullptr;  // owned by the pool, or by the DataPtr in use
};

// Whether `storage` has no holder but the one reference the caller has,
// strong or weak.
bool held_once(c10::StorageImpl* storage);

class CpuAliasPool {
 public:
  static CpuAliasPool& for_this_thread();

  CpuAliasPool() = default;
  ~CpuAliasPool();
  CpuAliasPool(const CpuAliasPool&) = delete;
  CpuAliasPool& operator=(const CpuAliasPool&) = delete;

  // Whether views may be taken now: not inside InferenceMode, whose tensors
  // have other dispatch keys and no version counter.
  static bool usable();

  // A view of `dtype`, no data pointer (a new one if the pool is empty).
  PooledCpuAlias take(caffe2::TypeMeta dtype);

  // Whether a view (its tensor and access context), after its call, is
  // exactly as take() left it but for what give() resets, and held by
  // nothing else: not by the kernel, Python or a weak reference, its storage
  // not shared with another tensor, and its DataPtr the one CpuAliases
  // installed. Anything else escaped the call and must be left to its
  // holders (its access then closes with the storage).
  bool reusable(const at::Tensor& tensor, const ScopedHostAccess* access) const;

  // Takes back a reusable view whose access was closed: its DataPtr is
  // dropped without running the deleter, its device storage let go, its
  // autograd metadata and version counter reset. Beyond the pool's capacity
  // the view is destroyed instead.
  void give(PooledCpuAlias view) noexcept;

 private:
  // The few dense arguments of the calls that run at once on one thread
  // (nested calls included) fit; more are built fresh.
  static constexpr size_t kCapacity = 8;
  c10::SmallVector<PooledCpuAlias, kCapacity> views_;
  // The dispatch keys of the views this pool builds.
  c10::DispatchKeySet keys_;
};

}  // namespace at::openreg
