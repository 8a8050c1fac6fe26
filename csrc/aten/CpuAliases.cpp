#include "aten/CpuAliases.h"

#include <algorithm>
#include <cstring>
#include <typeinfo>
#include <utility>

#include <c10/core/DeviceGuard.h>
#include <c10/core/TensorImpl.h>

#include "aten/CpuAliasPool.h"
#include "aten/DeviceCall.h"
#include "aten/ScopedHostAccess.h"
#include "runtime/OpenRegDeviceAllocator.h"
#include "runtime/OpenRegGenerator.h"
#include "runtime/OpenRegException.h"
#include "runtime/OpenRegStorage.h"

namespace at::openreg {
namespace {

// The allocator of alias storages. When a CPU kernel grows an argument (the
// resize_ of an out= tensor), the new bytes are device memory as well, and
// write_back hands them to the device storage without a copy.
struct DeviceBackedHostAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DataPtr device = c10::openreg::getDeviceAllocator()->allocate(nbytes);
    const void* device_ptr = device.get();
    return open_host_access(device_ptr, nbytes, std::move(device), {});
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);  // both are host views
  }
};

DeviceBackedHostAllocator g_device_backed_allocator;

// The dispatch keys of a tensor mirrored on the other side. A ZeroTensor
// (autograd's efficient zeros) can only get its key at construction.
c10::DispatchKeySet mirrored_keys(c10::DispatchKey backend, const c10::TensorImpl& from) {
  c10::DispatchKeySet keys(backend);
  return from._is_zerotensor() ? keys.add(c10::DispatchKey::ZeroTensor) : keys;
}

void copy_flags(const c10::TensorImpl& from, c10::TensorImpl& to) {
  to._set_conj(from.is_conj());
  to._set_neg(from.is_neg());
}

}  // namespace

c10::Allocator* device_backed_host_allocator() {
  return &g_device_backed_allocator;
}

CpuAliases::CpuAliases(c10::Device device, std::string_view op_name)
    : launch_(device, op_name), device_(device), op_name_(op_name) {}

CpuAliases::CpuAliases(const DeviceCall& call) : CpuAliases(call.device(), call.op()) {}

CpuAliases::~CpuAliases() {
  return_pooled_views();
}

void CpuAliases::return_pooled_views() noexcept {
  // What holds host tensors besides the pooled views goes first: it may
  // hold a pooled view's storage.
  quantizers_.clear();
  quantized_.clear();
  sparse_.clear();
  storages_.clear();
  bool any_pooled = false;
  for (TensorEntry& entry : tensors_) {
    if (entry.pooled == nullptr) {
      entry.host.reset();
    } else {
      any_pooled = true;
    }
  }
  if (!any_pooled && adopted_.empty()) {
    tensors_.clear();
    return;
  }
  CpuAliasPool& pool = CpuAliasPool::for_this_thread();
  // Views that escaped are dropped here (their holders keep them); the
  // others' accesses close with the adopted results'.
  c10::SmallVector<const ScopedHostAccess*, 8> closing(adopted_.begin(), adopted_.end());
  for (TensorEntry& entry : tensors_) {
    if (entry.pooled != nullptr) {
      if (pool.reusable(entry.host, entry.pooled)) {
        closing.push_back(entry.pooled);
      } else {
        entry.host.reset();
        entry.pooled = nullptr;
      }
    }
  }
  // One batch per device (a batch reaches one device; a copy between
  // devices has views on two).
  c10::SmallVector<const void*, 8> device_ptrs;
  while (!closing.empty()) {
    const c10::Device device = closing.front()->keep_alive->device();
    device_ptrs.clear();
    // remove_if applies the predicate once per element, in order.
    const auto others = std::remove_if(closing.begin(), closing.end(), [&](const ScopedHostAccess* access) {
      if (access->keep_alive->device() != device) {
        return false;
      }
      device_ptrs.push_back(access->device_ptr);
      return true;
    });
    closing.erase(others, closing.end());
    end_accesses(device_ptrs.size(), device_ptrs.data());
  }
  for (ScopedHostAccess* access : adopted_) {
    delete access;  // after its access: drops the device storage it kept alive
  }
  adopted_.clear();
  for (TensorEntry& entry : tensors_) {
    if (entry.pooled != nullptr) {
      pool.give({std::move(entry.host), entry.pooled});
    }
  }
  tensors_.clear();
}

CpuAliases::TensorEntry* CpuAliases::find(const c10::TensorImpl* device_impl) {
  for (TensorEntry& entry : tensors_) {
    if (entry.device == device_impl) {
      return &entry;
    }
  }
  return nullptr;
}

namespace {

// A pooled view keeps the sizes, strides and offset of its last call, which
// most calls repeat: setting them again (and recomputing the contiguity flags
// they imply) is skipped when they are equal.
void mirror_geometry(const c10::TensorImpl& from, c10::TensorImpl& to) {
  if (!to.sizes().equals(from.sizes()) || !to.strides().equals(from.strides()) ||
      to.storage_offset() != from.storage_offset()) {
    to.set_sizes_and_strides(from.sizes(), from.strides(), from.storage_offset());
  }
}

}  // namespace

void CpuAliases::take_pooled_views(c10::ArrayRef<const at::Tensor*> device_tensors) {
  if (!CpuAliasPool::usable()) {
    return;
  }
  // The tensors that get one: each storage once (a second tensor over a
  // storage shares its host storage, a fresh view), one device per batch, a
  // storage without bytes needs no access, a ZeroTensor gets its key at
  // construction. Their entries are added first, without data.
  CpuAliasPool* pool = nullptr;
  const size_t first = tensors_.size();
  c10::SmallVector<const void*, 4> device_ptrs;
  c10::SmallVector<size_t, 4> sizes;
  const auto mapped = [&](const c10::StorageImpl* storage) {
    for (const auto& entry : storages_) {
      if (entry.device == storage) {
        return true;
      }
    }
    // Pending ones, by address (a storage has one).
    return std::find(device_ptrs.begin(), device_ptrs.end(), storage->data()) != device_ptrs.end();
  };
  for (const at::Tensor* device_tensor : device_tensors) {
    c10::TensorImpl* device_impl = device_tensor->unsafeGetTensorImpl();
    const c10::StorageImpl* storage = device_impl->unsafe_storage().unsafeGetStorageImpl();
    if (storage->data() == nullptr || device_tensor->_is_zerotensor() ||
        (!device_ptrs.empty() && storage->device() != tensors_[first].device->unsafe_storage().device()) ||
        mapped(storage)) {
      continue;
    }
    if (pool == nullptr) {
      pool = &CpuAliasPool::for_this_thread();
    }
    PooledCpuAlias view = pool->take(device_tensor->dtype());
    tensors_.push_back({device_impl, std::move(view.tensor), view.access});
    device_ptrs.push_back(storage->data());
    sizes.push_back(storage->nbytes());
  }
  if (device_ptrs.empty()) {
    return;
  }
  c10::SmallVector<void*, 4> host_ptrs(device_ptrs.size());
  const orError_t opened =
      orMemAccessBeginBatch(device_ptrs.size(), device_ptrs.data(), sizes.data(), host_ptrs.data());
  if (opened != orSuccess) {
    for (size_t i = first; i < tensors_.size(); ++i) {
      pool->give({std::move(tensors_[i].host), tensors_[i].pooled});
    }
    tensors_.resize(first);
    OPENREG_CHECK(opened);
  }
  for (size_t i = 0; i < device_ptrs.size(); ++i) {
    TensorEntry& entry = tensors_[first + i];
    c10::StorageImpl* device_storage = entry.device->unsafe_storage().unsafeGetStorageImpl();
    entry.pooled->device_ptr = device_ptrs[i];
    entry.pooled->keep_alive = c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(device_storage);
    c10::TensorImpl* host_impl = entry.host.unsafeGetTensorImpl();
    c10::StorageImpl* host_storage = host_impl->unsafe_storage().unsafeGetStorageImpl();
    host_storage->set_data_ptr_noswap(
        c10::DataPtr(host_ptrs[i], entry.pooled, &close_pooled_host_access, c10::Device(c10::kCPU)));
    host_storage->set_nbytes(sizes[i]);
    host_storage->set_resizable(device_storage->resizable());
    mirror_geometry(*entry.device, *host_impl);
    copy_flags(*entry.device, *host_impl);
    storages_.push_back({device_storage, host_impl->storage(), host_ptrs[i]});
  }
}

void CpuAliases::open(c10::ArrayRef<const at::Tensor*> device_tensors) {
  c10::SmallVector<const at::Tensor*, 4> dense;
  for (const at::Tensor* device_tensor : device_tensors) {
    const c10::TensorImpl* impl = device_tensor->unsafeGetTensorImpl();
    if (device_tensor->defined() && device_tensor->is_privateuseone() && device_tensor->device() == device_ &&
        device_tensor->layout() == c10::kStrided && !impl->is_nested() && !device_tensor->is_quantized() &&
        find(impl) == nullptr) {
      c10::openreg::check_tensor_in_storage(*device_tensor, op_name_);
      dense.push_back(device_tensor);
    }
  }
  take_pooled_views(dense);
}

c10::Storage CpuAliases::host_storage_for(const c10::Storage& device_storage) {
  c10::StorageImpl* device_impl = device_storage.unsafeGetStorageImpl();
  for (const auto& entry : storages_) {
    if (entry.device == device_impl) {
      return entry.host;
    }
  }
  c10::DataPtr view = open_host_access(
      device_storage.data(), device_storage.nbytes(), {},
      c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(device_impl));
  c10::Storage host(
      c10::Storage::use_byte_size_t(), device_storage.nbytes(), std::move(view), &g_device_backed_allocator,
      device_storage.resizable());
  storages_.push_back({device_impl, host, host.data()});
  return host;
}

std::optional<at::Generator> CpuAliases::generator(const std::optional<at::Generator>& generator) const {
  return c10::openreg::host_generator_for(generator, device_);
}

at::Tensor CpuAliases::alias(const at::Tensor& device_tensor, bool written) {
  if (!device_tensor.defined() || !device_tensor.is_privateuseone()) {
    return device_tensor;
  }
  c10::TensorImpl* device_impl = device_tensor.unsafeGetTensorImpl();
  if (TensorEntry* entry = find(device_impl)) {
    entry->written = entry->written || written;
    return entry->host;
  }
  if (device_tensor.layout() != c10::kStrided) {  // sparse layouts; nested tensors are strided
    return alias_sparse(device_tensor);
  }
  if (device_impl->is_nested()) {
    at::Tensor host = alias_nested(device_tensor);
    tensors_.push_back({device_impl, host, nullptr, written});
    return host;
  }
  c10::openreg::check_tensor_in_storage(device_tensor, op_name_);
  if (device_tensor.is_quantized()) {
    at::Tensor host = alias_quantized(device_tensor);
    tensors_.push_back({device_impl, host, nullptr, written});
    return host;
  }
  take_pooled_views({&device_tensor});
  if (TensorEntry* entry = find(device_impl)) {
    entry->written = written;
    return entry->host;
  }
  at::Tensor host = at::detail::make_tensor<c10::TensorImpl>(
      host_storage_for(device_tensor.storage()), mirrored_keys(c10::DispatchKey::CPU, *device_impl),
      device_tensor.dtype());
  c10::TensorImpl* host_impl = host.unsafeGetTensorImpl();
  mirror_geometry(*device_impl, *host_impl);
  copy_flags(*device_impl, *host_impl);
  tensors_.push_back({device_impl, host, nullptr, written});
  return host;
}

void CpuAliases::write_back(StorageEntry& entry) {
  const c10::DataPtr& now = entry.host.data_ptr();
  const size_t nbytes = entry.host.nbytes();
  c10::StorageImpl* device_impl = entry.device;
  if (now.get() == entry.host_data && nbytes == device_impl->nbytes()) {
    return;
  }
  if (now.get() != entry.host_data) {
    if (ScopedHostAccess* access = owning_host_access(now)) {
      // Grown into device memory by the kernel: hand it over, no copy. The
      // host view stays valid through keep_alive while the alias lives.
      device_impl->set_data_ptr_noswap(std::move(access->owned));
      access->keep_alive = c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(device_impl);
    } else {
      c10::DeviceGuard guard(device_impl->device());
      c10::DataPtr fresh = c10::openreg::getDeviceAllocator()->allocate(nbytes);
      if (nbytes > 0) {
        OPENREG_CHECK(orMemcpy(fresh.get(), now.get(), nbytes, orMemcpyHostToDevice));
      }
      device_impl->set_data_ptr_noswap(std::move(fresh));
    }
  }
  device_impl->set_nbytes(nbytes);
  entry.host_data = now.get();
}

void CpuAliases::write_back() {
  // Storages first: a tensor's write-back below may look its storage up.
  for (auto& entry : storages_) {
    write_back(entry);
  }
  for (auto& entry : tensors_) {
    c10::TensorImpl* device_impl = entry.device;
    if (!entry.written || device_impl->is_nested()) {
      // Not written, or a nested tensor: its buffer is written in place, and
      // CPU kernels keep nested metadata.
      continue;
    }
    const c10::TensorImpl* host_impl = entry.host.unsafeGetTensorImpl();
    c10::StorageImpl* storage = device_storage_for(host_impl->storage());
    if (storage != device_impl->storage().unsafeGetStorageImpl()) {
      device_impl->set_storage_keep_dtype(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(storage)));
    }
    if (device_impl->sizes() != host_impl->sizes() || device_impl->strides() != host_impl->strides() ||
        device_impl->storage_offset() != host_impl->storage_offset()) {
      device_impl->set_sizes_and_strides(host_impl->sizes(), host_impl->strides(), host_impl->storage_offset());
    }
    // Kernels may also flip the lazy conjugate/negative bits of an out=
    // argument (linalg_lu_solve with left=False returns a conjugated view).
    copy_flags(*host_impl, *device_impl);
  }
  // After the components' own write-back (a resized values tensor).
  if (!sparse_.empty()) {
    write_back_sparse();
  }
  if (!quantized_.empty()) {
    write_back_quantized();
  }
}

c10::StorageImpl* CpuAliases::device_storage_for(const c10::Storage& host_storage) {
  const c10::StorageImpl* host_impl = host_storage.unsafeGetStorageImpl();
  for (const auto& entry : storages_) {
    if (entry.host.unsafeGetStorageImpl() == host_impl) {
      return entry.device;
    }
  }
  // A storage the kernel allocated: materialize it on the device once, and
  // remember it so that several results sharing it share the device copy.
  c10::DeviceGuard guard(device_);
  const size_t nbytes = host_storage.nbytes();
  c10::Storage device;
  if (ScopedHostAccess* access = owning_host_access(host_storage.data_ptr())) {
    device = c10::Storage(
        c10::Storage::use_byte_size_t(), nbytes, std::move(access->owned), c10::openreg::getDeviceAllocator(),
        /*resizable=*/true);
    access->keep_alive = c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(device.unsafeGetStorageImpl());
  } else {
    device =
        c10::Storage(c10::Storage::use_byte_size_t(), nbytes, c10::openreg::getDeviceAllocator(), /*resizable=*/true);
    // A ZeroTensor's storage has a size but no memory: nothing to copy.
    if (nbytes > 0 && host_storage.data() != nullptr) {
      OPENREG_CHECK(orMemcpy(device.mutable_data(), host_storage.data(), nbytes, orMemcpyHostToDevice));
    }
  }
  c10::StorageImpl* device_impl = device.unsafeGetStorageImpl();
  storages_.push_back({device_impl, host_storage, host_storage.data(), std::move(device)});
  return device_impl;
}

at::Tensor CpuAliases::to_device(const at::Tensor& host_result) {
  if (!host_result.defined()) {
    return host_result;
  }
  const c10::TensorImpl* host_impl = host_result.unsafeGetTensorImpl();
  for (const auto& entry : tensors_) {
    if (entry.host.unsafeGetTensorImpl() == host_impl) {
      return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim_copy(entry.device));
    }
  }
  if (host_impl->is_nested()) {
    return nested_to_device(host_result);
  }
  if (host_result.layout() != c10::kStrided) {
    return sparse_to_device(host_result);
  }
  if (host_result.is_quantized()) {
    return quantized_to_device(host_result);
  }
  if (adopt_device_result(host_result)) {
    return host_result;
  }
  at::Tensor result = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(device_storage_for(host_result.storage()))),
      mirrored_keys(c10::DispatchKey::PrivateUse1, *host_impl), host_result.dtype());
  c10::TensorImpl* impl = result.unsafeGetTensorImpl();
  impl->set_sizes_and_strides(host_result.sizes(), host_result.strides(), host_result.storage_offset());
  copy_flags(*host_impl, *impl);
  return result;
}

bool CpuAliases::adopt_device_result(const at::Tensor& host_result) {
  c10::TensorImpl* impl = host_result.unsafeGetTensorImpl();
  if (host_result.use_count() != 1 || host_result.weak_use_count() != 1 || typeid(*impl) != typeid(c10::TensorImpl) ||
      !impl->key_set().has(c10::DispatchKey::CPU) || impl->key_set().has(c10::DispatchKey::Python) ||
      impl->pyobj_slot()->load_pyobj() != nullptr || impl->autograd_meta() != nullptr) {
    return false;
  }
  c10::StorageImpl* storage = impl->storage().unsafeGetStorageImpl();
  ScopedHostAccess* access = storage == nullptr ? nullptr : owning_host_access(storage->data_ptr());
  if (access == nullptr || !held_once(storage) || storage->has_materializer() ||
      storage->pyobj_slot()->load_pyobj() != nullptr) {
    return false;
  }
  // Out of the context first, and the context out of the DataPtr, whose
  // deleter would close the access now: it closes with the pooled views'.
  adopted_.push_back(release_host_access(storage->_mutable_data_ptr_no_checks()));
  c10::DataPtr device_data = std::move(access->owned);
  access->keep_alive = c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(storage);
  storage->set_data_ptr_noswap(std::move(device_data));
  storage->set_allocator(c10::openreg::getDeviceAllocator());
  impl->set_storage_keep_dtype(impl->storage());  // the tensor's device follows its storage's
  impl->_change_backend_component_keys(storage->device());
  return true;
}

}  // namespace at::openreg
