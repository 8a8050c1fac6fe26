#include "HostMemory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "Environment.h"
#include "Error.h"

namespace openreg::runtime {

namespace {

struct HostRegistry {
  std::shared_mutex mutex;
  std::map<uintptr_t, size_t> allocations;  // base -> page-rounded size
};

HostRegistry& registry() {
  static HostRegistry* const instance = new HostRegistry;  // leaked: outlives static destruction
  return *instance;
}

}  // namespace

bool findHostAllocation(uintptr_t address, uintptr_t* base, size_t* size) {
  HostRegistry& host = registry();
  std::shared_lock lock(host.mutex);
  auto next = host.allocations.upper_bound(address);
  if (next == host.allocations.begin())
    return false;
  const auto [start, bytes] = *std::prev(next);
  if (address - start >= bytes)
    return false;
  *base = start;
  *size = bytes;
  return true;
}

}  // namespace openreg::runtime

using namespace openreg::runtime;

orError_t orMallocHost(void** ptr, size_t size) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (ptr == nullptr)
    return fail(orErrorInvalidValue, "orMallocHost: ptr is NULL");
  if (size == 0) {
    *ptr = nullptr;
    return orSuccess;
  }
  if (size > SIZE_MAX - config->pageSize) {
    return fail(orErrorMemoryAllocation, "orMallocHost: cannot allocate %zu bytes of host memory", size);
  }
  const size_t bytes = config->roundUpToPage(size);
  // "Page-locked" is simulated: locking would run into RLIMIT_MEMLOCK and
  // buys nothing without a DMA engine. Page alignment is kept.
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    return fail(
        orErrorMemoryAllocation, "orMallocHost: cannot allocate %zu bytes of host memory: %s", size,
        std::strerror(errno));
  }
  HostRegistry& host = registry();
  std::unique_lock lock(host.mutex);
  host.allocations.emplace(reinterpret_cast<uintptr_t>(memory), bytes);
  *ptr = memory;
  return orSuccess;
}

orError_t orFreeHost(void* ptr) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (ptr == nullptr)
    return orSuccess;
  HostRegistry& host = registry();
  std::unique_lock lock(host.mutex);
  const auto it = host.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == host.allocations.end()) {
    return fail(orErrorInvalidValue, "orFreeHost: %p was not returned by orMallocHost", ptr);
  }
  const size_t size = it->second;
  host.allocations.erase(it);
  lock.unlock();
  munmap(ptr, size);
  return orSuccess;
}
