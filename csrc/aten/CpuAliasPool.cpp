#include "aten/CpuAliasPool.h"

#include <c10/core/InferenceMode.h>
#include <c10/core/TensorImpl.h>

#include "aten/CpuAliases.h"

namespace at::openreg {

bool held_once(c10::StorageImpl* storage) {
  auto ptr = c10::intrusive_ptr<c10::StorageImpl>::reclaim(storage);
  const bool once = ptr.use_count() == 1 && ptr.weak_use_count() == 1;
  ptr.release();
  return once;
}

CpuAliasPool& CpuAliasPool::for_this_thread() {
  thread_local CpuAliasPool pool;
  return pool;
}

CpuAliasPool::~CpuAliasPool() {
  for (PooledCpuAlias& view : views_) {
    delete view.access;
  }
}

bool CpuAliasPool::usable() {
  return !c10::InferenceMode::is_enabled();
}

PooledCpuAlias CpuAliasPool::take(caffe2::TypeMeta dtype) {
  if (views_.empty()) {
    c10::Storage storage(
        c10::Storage::use_byte_size_t(), 0, c10::DataPtr(nullptr, c10::Device(c10::kCPU)),
        device_backed_host_allocator(),
        /*resizable=*/false);
    at::Tensor tensor =
        at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
    keys_ = tensor.key_set();
    return {std::move(tensor), new ScopedHostAccess()};
  }
  PooledCpuAlias view = std::move(views_.back());
  views_.pop_back();
  c10::TensorImpl* impl = view.tensor.unsafeGetTensorImpl();
  if (impl->dtype() != dtype) {
    impl->set_storage_and_dtype(impl->storage(), dtype);
  }
  return view;
}

bool CpuAliasPool::reusable(const at::Tensor& tensor, const ScopedHostAccess* access) const {
  const c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  if (tensor.use_count() != 1 || tensor.weak_use_count() != 1 || impl->key_set() != keys_ ||
      impl->pyobj_slot()->load_pyobj() != nullptr || impl->is_wrapped_number() || impl->has_symbolic_sizes_strides()) {
    return false;
  }
  c10::StorageImpl* storage = impl->storage().unsafeGetStorageImpl();
  if (storage == nullptr || !held_once(storage) || storage->has_materializer() ||
      storage->pyobj_slot()->load_pyobj() != nullptr) {
    return false;
  }
  // Another deleter or context: the kernel replaced the DataPtr (it grew
  // the storage), and the context CpuAliases installed is gone with it.
  const c10::DataPtr& data = storage->data_ptr();
  return data.get_deleter() == &close_pooled_host_access && data.get_context() == access;
}

void CpuAliasPool::give(PooledCpuAlias view) noexcept {
  c10::TensorImpl* impl = view.tensor.unsafeGetTensorImpl();
  c10::StorageImpl* storage = impl->storage().unsafeGetStorageImpl();
  // The pool owns the context again: the deleter must not run.
  (void)storage->_mutable_data_ptr_no_checks().release_context();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
  storage->set_nbytes(0);
  view.access->device_ptr = nullptr;
  view.access->keep_alive.reset();
  // What the call may have given the view: requires_grad (FallbackPipeline.cpp
  // mirrors it), and version bumps by a kernel that called in-place
  // operators on it.
  if (impl->autograd_meta() != nullptr) {
    impl->set_autograd_meta(nullptr);
  }
  if (impl->version_counter().current_version() != 0 || !impl->version_counter().unique()) {
    impl->set_version_counter(c10::VariableVersion(0));
  }
  if (views_.size() < kCapacity) {
    views_.push_back(std::move(view));
  } else {
    delete view.access;
  }
}

}  // namespace at::openreg
