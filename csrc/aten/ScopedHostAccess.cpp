#include "aten/ScopedHostAccess.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include <c10/util/flat_hash_map.h>

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"

namespace at::openreg {
namespace {

// Addressed host accesses (address_host_access), by host address.
class AddressedAccesses {
 public:
  c10::DataPtr adopt(c10::DataPtr view) {
    void* host = view.get();
    if (host == nullptr) {
      return view;  // zero bytes: nothing to find later
    }
    auto* access = static_cast<ScopedHostAccess*>(view.get_context());
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const bool inserted = accesses_.emplace(host, access).second;
      TORCH_INTERNAL_ASSERT(inserted, "openreg: host address ", host, " is already an open access");
      size_.fetch_add(1, std::memory_order_relaxed);
    }
    (void)view.release_context();
    return c10::DataPtr(host, host, &close, view.device());
  }

  ScopedHostAccess* find(const void* host) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = accesses_.find(host);
    return it == accesses_.end() ? nullptr : it->second;
  }

  ScopedHostAccess* take(const void* host) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = accesses_.find(host);
    if (it == accesses_.end()) {
      return nullptr;
    }
    ScopedHostAccess* access = it->second;
    accesses_.erase(it);
    size_.fetch_sub(1, std::memory_order_relaxed);
    return access;
  }

  // Closes the access at `host` if it is one of these; false otherwise.
  // Never throws; a child forked after openreg started owns none of the
  // parent's device memory and must not take a lock a parent thread held,
  // so there it closes nothing and leaks what it cannot tell apart.
  bool close_if_known(void* host) noexcept {
    if (size_.load(std::memory_order_relaxed) == 0) {
      return false;  // the common raw free of CPU memory: no lock
    }
    if (c10::openreg::device_count_ensure_non_throwing() == 0) {
      return true;
    }
    ScopedHostAccess* access = take(host);
    if (access == nullptr) {
      return false;
    }
    close_host_access(access);
    return true;
  }

  static void close(void* host) noexcept;

 private:
  std::mutex mutex_;
  ska::flat_hash_map<const void*, ScopedHostAccess*> accesses_;
  std::atomic<size_t> size_{0};
};

AddressedAccesses& addressed_accesses() {
  static auto* accesses = new AddressedAccesses();  // outlives every static DataPtr
  return *accesses;
}

void AddressedAccesses::close(void* host) noexcept {
  (void)addressed_accesses().close_if_known(host);
}

}  // namespace

void end_accesses(size_t count, const void* const* device_ptrs) noexcept {
  if (count > 0 && orMemAccessEndBatch(count, device_ptrs) != orSuccess) {
    std::fprintf(stderr, "openreg: orMemAccessEndBatch failed: %s\n", orGetLastErrorMessage());
  }
}

void close_host_access(void* context) {
  auto* access = static_cast<ScopedHostAccess*>(context);
  end_accesses(1, &access->device_ptr);
  delete access;
}

void close_pooled_host_access(void* context) {
  close_host_access(context);
}

c10::DataPtr open_host_access(
    const void* device_ptr, size_t nbytes, c10::DataPtr owned, c10::intrusive_ptr<c10::StorageImpl> keep_alive) {
  if (device_ptr == nullptr) {
    TORCH_CHECK(nbytes == 0, "openreg: storage of ", nbytes, " bytes has no device memory");
    return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
  }
  void* host_ptr = nullptr;
  OPENREG_CHECK(orMemAccessBegin(device_ptr, nbytes, &host_ptr));
  auto* access = new ScopedHostAccess{device_ptr, std::move(owned), std::move(keep_alive)};
  return c10::DataPtr(host_ptr, access, &close_host_access, c10::Device(c10::kCPU));
}

c10::DataPtr address_host_access(c10::DataPtr view) {
  return addressed_accesses().adopt(std::move(view));
}

bool close_addressed_host_access(void* host) noexcept {
  return addressed_accesses().close_if_known(host);
}

bool is_addressed_host_access(const c10::DataPtr& data) {
  return data.get_deleter() == &AddressedAccesses::close;
}

ScopedHostAccess* release_host_access(c10::DataPtr& data) {
  const bool addressed = is_addressed_host_access(data);
  void* context = data.release_context();
  return addressed ? addressed_accesses().take(context) : static_cast<ScopedHostAccess*>(context);
}

ScopedHostAccess* owning_host_access(const c10::DataPtr& data) {
  ScopedHostAccess* access = nullptr;
  if (data.get_deleter() == &close_host_access) {
    access = static_cast<ScopedHostAccess*>(data.get_context());
  } else if (is_addressed_host_access(data)) {
    access = addressed_accesses().find(data.get());
  }
  return access != nullptr && access->owned ? access : nullptr;
}

}  // namespace at::openreg
