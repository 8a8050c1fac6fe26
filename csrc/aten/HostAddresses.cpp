#include "aten/HostAddresses.h"

#include <algorithm>
#include <array>
#include <vector>

#include "aten/ScopedHostAccess.h"
#include "runtime/OpenRegException.h"
#include "runtime/OpenRegStorage.h"

namespace at::openreg {

HostAddresses::HostAddresses(c10::Device device, std::string_view op_name) : device_(device), op_name_(op_name) {}

HostAddresses::~HostAddresses() {
  close();
}

void HostAddresses::close() noexcept {
  end_accesses(device_bases_.size(), device_bases_.data());
  device_bases_.clear();
  host_bases_.clear();
  slots_.clear();
  launch_.reset();
}

namespace {
// Up to this many open storages, a linear search.
constexpr size_t kLinearSearch = 8;
}  // namespace

ptrdiff_t HostAddresses::find(const void* device_base) const {
  if (!slots_.empty()) {
    const auto it = slots_.find(device_base);
    return it == slots_.end() ? -1 : static_cast<ptrdiff_t>(it->second);
  }
  const auto it = std::find(device_bases_.begin(), device_bases_.end(), device_base);
  return it == device_bases_.end() ? -1 : it - device_bases_.begin();
}

void HostAddresses::append(const void* device_base) {
  device_bases_.push_back(device_base);
  if (device_bases_.size() == kLinearSearch + 1) {
    for (size_t slot = 0; slot < device_bases_.size(); ++slot) {
      slots_.emplace(device_bases_[slot], slot);  // the first slot of a repeated base
    }
  } else if (!slots_.empty()) {
    slots_.emplace(device_base, device_bases_.size() - 1);
  }
}

const c10::StorageImpl* HostAddresses::storage_of(const at::TensorBase& device_tensor) const {
  c10::openreg::check_tensor_in_storage(device_tensor, op_name_);
  return device_tensor.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
}

void HostAddresses::open_storages(c10::ArrayRef<const at::TensorBase*> device_tensors) {
  // The storages not open yet are appended, each once, then opened together.
  const size_t open = device_bases_.size();
  c10::SmallVector<size_t, 4> sizes;
  for (const at::TensorBase* device_tensor : device_tensors) {
    const c10::StorageImpl* storage = storage_of(*device_tensor);
    if (storage->data() != nullptr && find(storage->data()) < 0) {
      append(storage->data());
      sizes.push_back(storage->nbytes());
    }
  }
  begin(open, sizes.data(), sizes.size());
}

void HostAddresses::begin(size_t open, const size_t* sizes, size_t count) {
  if (count == 0) {
    return;
  }
  if (!launch_) {
    launch_.emplace(device_, op_name_);  // before the first byte is touched
  }
  host_bases_.resize(device_bases_.size());
  const orError_t opened = orMemAccessBeginBatch(
      count, device_bases_.data() + open, sizes, reinterpret_cast<void**>(host_bases_.data() + open));
  if (opened != orSuccess) {
    // All or nothing: none was opened, and the destructor must not end them.
    for (size_t slot = open; slot < device_bases_.size(); ++slot) {
      slots_.erase(device_bases_[slot]);
    }
    device_bases_.resize(open);
    host_bases_.resize(open);
    OPENREG_CHECK(opened);
  }
}

void HostAddresses::point_at_host(at::TensorIteratorBase& iter) {
  constexpr int kMaxOperands = 4;  // addcmul's output and three inputs
  TORCH_INTERNAL_ASSERT(iter.ntensors() <= kMaxOperands);
  std::array<const at::TensorBase*, kMaxOperands> tensors{};
  std::array<int, kMaxOperands> indices{};
  std::array<void*, kMaxOperands> host{};
  size_t count = 0;
  for (int i = 0; i < iter.ntensors(); ++i) {
    if (iter.tensor_base(i).is_privateuseone()) {
      tensors[count] = &iter.tensor_base(i);
      indices[count++] = i;
    }
  }
  addresses({tensors.data(), count}, host.data());
  for (size_t k = 0; k < count; ++k) {
    iter.unsafe_replace_operand(indices[k], host[k]);
  }
}

void HostAddresses::addresses(c10::ArrayRef<const at::TensorBase*> device_tensors, void** host) {
  if (device_bases_.empty() && device_tensors.size() <= kLinearSearch) {
    // A kernel's operands, none open yet: each storage is opened once per
    // operand with bytes, so that none is searched for. The runtime counts
    // every access and ends them alike, and operands in one allocation are
    // one run to it however many there are.
    std::array<size_t, kLinearSearch> sizes;
    std::array<size_t, kLinearSearch> offsets;  // of the data in its storage, in bytes
    size_t count = 0;
    for (const at::TensorBase* device_tensor : device_tensors) {
      const c10::StorageImpl* storage = storage_of(*device_tensor);
      if (storage->data() != nullptr) {
        const c10::TensorImpl* impl = device_tensor->unsafeGetTensorImpl();
        append(storage->data());
        sizes[count] = storage->nbytes();
        offsets[count++] = impl->storage_offset() * impl->itemsize();
      }
    }
    begin(0, sizes.data(), count);
    for (size_t i = 0, slot = 0; i < device_tensors.size(); ++i) {
      const bool has_bytes = device_tensors[i]->unsafeGetTensorImpl()->unsafe_storage().data() != nullptr;
      host[i] = has_bytes ? host_bases_[slot] + offsets[slot] : nullptr;
      slot += has_bytes;
    }
    return;
  }
  open_storages(device_tensors);
  for (size_t i = 0; i < device_tensors.size(); ++i) {
    const at::TensorBase& device_tensor = *device_tensors[i];
    const void* base = device_tensor.unsafeGetTensorImpl()->unsafe_storage().data();
    const ptrdiff_t slot = base != nullptr ? find(base) : -1;
    host[i] = slot < 0  // no bytes
        ? nullptr
        : host_bases_[slot] +
            (static_cast<const char*>(device_tensor.const_data_ptr()) - static_cast<const char*>(base));
  }
}

void* HostAddresses::address(const at::TensorBase& device_tensor) {
  void* host = nullptr;
  addresses({&device_tensor}, &host);
  return host;
}

void HostAddresses::open(c10::ArrayRef<at::TensorList> lists) {
  std::vector<const at::TensorBase*> device_tensors;
  for (const at::TensorList list : lists) {
    for (const at::Tensor& tensor : list) {
      if (tensor.defined() && tensor.is_privateuseone() && tensor.layout() == c10::kStrided) {
        device_tensors.push_back(&tensor);
      }
    }
  }
  open_storages(device_tensors);
}

}  // namespace at::openreg
