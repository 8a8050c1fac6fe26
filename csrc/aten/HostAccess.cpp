#include "aten/HostAccess.h"

#include <cstdio>

#include "runtime/OpenRegException.h"

namespace at::openreg {

void end_accesses(size_t count, const void* const* device_ptrs) noexcept {
  if (count > 0 && orMemAccessEndBatch(count, device_ptrs) != orSuccess) {
    std::fprintf(stderr, "openreg: orMemAccessEndBatch failed: %s\n", orGetLastErrorMessage());
  }
}

void close_host_access(void* context) {
  auto* access = static_cast<HostAccess*>(context);
  end_accesses(1, &access->device_ptr);
  delete access;
}

void close_pooled_host_access(void* context) {
  close_host_access(context);
}

c10::DataPtr open_host_access(
    const void* device_ptr,
    size_t nbytes,
    c10::DataPtr owned,
    c10::intrusive_ptr<c10::StorageImpl> keep_alive) {
  if (device_ptr == nullptr) {
    TORCH_CHECK(nbytes == 0, "openreg: storage of ", nbytes, " bytes has no device memory");
    return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
  }
  void* host_ptr = nullptr;
  OPENREG_CHECK(orMemAccessBegin(device_ptr, nbytes, &host_ptr));
  auto* access = new HostAccess{device_ptr, std::move(owned), std::move(keep_alive)};
  return c10::DataPtr(host_ptr, access, &close_host_access, c10::Device(c10::kCPU));
}

HostAccess* owning_host_access(const c10::DataPtr& data) {
  if (data.get_deleter() != &close_host_access) {
    return nullptr;
  }
  auto* access = static_cast<HostAccess*>(data.get_context());
  return access->owned ? access : nullptr;
}

} // namespace at::openreg
