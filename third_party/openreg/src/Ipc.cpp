// orIpcGetMemHandle / orIpcOpenMemHandle / orIpcCloseMemHandle.
//
// A device's memory is one memfd (Arena.h), so sharing an allocation means
// mapping a range of that file into another process. The handle names the
// exporter's process id and descriptor number, and the importer opens
// /proc/<pid>/fd/<n>: that reopens the very memfd, whatever relation the two
// processes have (spawn, forkserver, unrelated), with no helper thread or
// socket in the exporter, and the handle stays plain bytes that any channel
// (a pipe, a pickle, a file) carries, as CUDA's does. The file's inode,
// recorded in the handle and checked after opening, tells a live exporter
// from a reused process id or descriptor. The importer maps the range twice,
// as the arena is mapped: a user view (PROT_NONE under memory protection)
// whose address it returns, and a host view for copies and scoped access,
// and registers the range as an allocation of the device, so every entry
// point treats it as device memory.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>

#include "DeviceMemory.h"
#include "Error.h"
#include "ReadSection.h"
#include "Stream.h"

namespace openreg::runtime {

std::atomic<size_t> importedRangeCount{0};

namespace {

constexpr char kMagic[8] = {'o', 'r', 'I', 'p', 'c', 'M', 'e', 'm'};

// What orIpcMemHandle_t carries.
struct HandleData {
  char magic[8];
  int32_t pid;  // the exporting process
  int32_t fd;  // its descriptor of the device's memfd
  int32_t device;  // the device index, the same in both processes
  uint32_t reserved;
  uint64_t offset;  // of the allocation in the memfd
  uint64_t size;  // of the allocation, page-rounded
  uint64_t inode;  // identity of the memfd, checked by the importer
  uint64_t fileSystem;
};
static_assert(sizeof(HandleData) <= OR_IPC_HANDLE_SIZE);

// The same allocation of the same exporter file, however many handles name it.
using Identity = std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>;  // fs, inode, offset, size

struct Import {
  int device;
  size_t size;
  uintptr_t hostBase;
  Identity identity;
  uint32_t opens;  // orIpcOpenMemHandle calls not yet closed
};

// Writers hold both locks (openCloseMutex first); lookups from other entry
// points take registryMutex shared and release it before any device lock.
std::mutex openCloseMutex;
std::shared_mutex registryMutex;
std::map<uintptr_t, Import> imports;  // by user base address
std::map<Identity, uintptr_t> importsByIdentity;

orError_t exporterGone(const HandleData& data, const char* why) {
  return fail(
      orErrorInvalidResourceHandle,
      "orIpcOpenMemHandle: cannot open the memory of device %d (%llu bytes) exported by "
      "process %d: %s",
      data.device, static_cast<unsigned long long>(data.size), data.pid, why);
}

}  // namespace

Device* deviceOfImport(uintptr_t address) {
  std::shared_lock lock(registryMutex);
  const auto next = imports.upper_bound(address);
  if (next == imports.begin())
    return nullptr;
  const auto& [base, import] = *std::prev(next);
  return address - base < import.size ? &device(import.device) : nullptr;
}

bool overlapsImport(uintptr_t address, size_t bytes) {
  std::shared_lock lock(registryMutex);
  auto it = imports.upper_bound(address);
  if (it != imports.begin() && address - std::prev(it)->first < std::prev(it)->second.size) {
    return true;
  }
  return it != imports.end() && it->first - address < bytes;
}

}  // namespace openreg::runtime

using namespace openreg::runtime;

orError_t orIpcGetMemHandle(orIpcMemHandle_t* handle, void* devPtr) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (handle == nullptr)
    return fail(orErrorInvalidValue, "orIpcGetMemHandle: handle is NULL");
  const uintptr_t address = reinterpret_cast<uintptr_t>(devPtr);
  Device* dev = deviceContaining(*config, address);
  if (dev == nullptr) {
    return fail(orErrorInvalidDevicePointer, "orIpcGetMemHandle: %p is not a device pointer", devPtr);
  }
  const ReadSection section;
  uintptr_t base;
  const Allocation* allocation =
      findAllocation(*dev, *currentAllocations(*dev), address, 0, "orIpcGetMemHandle", "pointer", &base);
  if (allocation == nullptr)
    return orErrorInvalidDevicePointer;
  if (allocation->imported) {
    return fail(
        orErrorInvalidValue,
        "orIpcGetMemHandle: %p was opened from another process's handle; only the "
        "process that allocated it can share it",
        devPtr);
  }
  const Arena* arena = dev->arena.load(std::memory_order_relaxed);
  struct stat file{};
  if (fstat(arena->fd(), &file) != 0) {
    return fail(
        orErrorInvalidValue, "orIpcGetMemHandle: fstat of the memory of device %d: %s", dev->index,
        std::strerror(errno));
  }
  HandleData data{};
  std::memcpy(data.magic, kMagic, sizeof kMagic);
  data.pid = getpid();
  data.fd = arena->fd();
  data.device = dev->index;
  data.offset = base - arena->userBase();
  data.size = allocation->size;
  data.inode = file.st_ino;
  data.fileSystem = file.st_dev;
  *handle = {};
  std::memcpy(handle->reserved, &data, sizeof data);
  return orSuccess;
}

orError_t orIpcOpenMemHandle(void** devPtr, orIpcMemHandle_t handle, unsigned int flags) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  if (devPtr == nullptr)
    return fail(orErrorInvalidValue, "orIpcOpenMemHandle: devPtr is NULL");
  if (flags != 0) {
    return fail(orErrorInvalidValue, "orIpcOpenMemHandle: flags must be 0, got %u", flags);
  }
  HandleData data;
  std::memcpy(&data, handle.reserved, sizeof data);
  if (std::memcmp(data.magic, kMagic, sizeof kMagic) != 0 || data.size == 0 || data.offset % config->pageSize != 0 ||
      data.size % config->pageSize != 0) {
    return fail(orErrorInvalidValue, "orIpcOpenMemHandle: the handle was not made by orIpcGetMemHandle");
  }
  if (data.device < 0 || data.device >= config->deviceCount) {
    return fail(
        orErrorInvalidDevice,
        "orIpcOpenMemHandle: the memory was exported from device %d of process %d, but "
        "this process has %d device(s) (OPENREG_DEVICE_COUNT)",
        data.device, data.pid, config->deviceCount);
  }
  if (data.pid == getpid()) {
    return fail(
        orErrorInvalidValue,
        "orIpcOpenMemHandle: the handle was exported by this process; use the device "
        "pointer it was made from");
  }
  const Identity identity{data.fileSystem, data.inode, data.offset, data.size};

  std::lock_guard openClose(openCloseMutex);
  if (const auto known = importsByIdentity.find(identity); known != importsByIdentity.end()) {
    ++imports.at(known->second).opens;
    *devPtr = reinterpret_cast<void*>(known->second);
    return orSuccess;
  }

  const std::string path = "/proc/" + std::to_string(data.pid) + "/fd/" + std::to_string(data.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ESRCH)
      return exporterGone(data, "that process has exited");
    const std::string why = "opening " + path + " failed: " + std::strerror(errno);
    return exporterGone(data, why.c_str());
  }
  struct stat file{};
  const bool sameFile =
      fstat(fd, &file) == 0 && file.st_ino == data.inode && static_cast<uint64_t>(file.st_dev) == data.fileSystem;
  if (!sameFile || static_cast<uint64_t>(file.st_size) < data.offset + data.size) {
    close(fd);
    return exporterGone(data, "that process has exited (its process id was reused)");
  }
  const int mapFlags = MAP_SHARED | MAP_NORESERVE;
  const off_t offset = static_cast<off_t>(data.offset);
  void* user =
      mmap(nullptr, data.size, config->memoryProtection ? PROT_NONE : PROT_READ | PROT_WRITE, mapFlags, fd, offset);
  void* host = user == MAP_FAILED ? MAP_FAILED : mmap(nullptr, data.size, PROT_READ | PROT_WRITE, mapFlags, fd, offset);
  const int mapError = errno;
  close(fd);  // the mappings keep the file
  if (host == MAP_FAILED) {
    if (user != MAP_FAILED)
      munmap(user, data.size);
    return fail(
        orErrorMemoryAllocation,
        "orIpcOpenMemHandle: cannot map %llu bytes of device %d exported by process %d: "
        "%s",
        static_cast<unsigned long long>(data.size), data.device, data.pid, std::strerror(mapError));
  }

  const uintptr_t userBase = reinterpret_cast<uintptr_t>(user);
  const uintptr_t hostBase = reinterpret_cast<uintptr_t>(host);
  Device& dev = device(data.device);
  {
    std::lock_guard lock(dev.mutex);
    insertAllocation(dev, userBase, new Allocation(data.size, hostBase - userBase, /*imported=*/true));
  }
  {
    std::unique_lock lock(registryMutex);
    imports.emplace(userBase, Import{data.device, data.size, hostBase, identity, 1});
    importsByIdentity.emplace(identity, userBase);
    importedRangeCount.fetch_add(1, std::memory_order_release);
  }
  *devPtr = user;
  return orSuccess;
}

orError_t orIpcCloseMemHandle(void* devPtr) {
  const Config* config = runtimeConfig();
  if (config == nullptr)
    return orErrorInitializationError;
  const uintptr_t address = reinterpret_cast<uintptr_t>(devPtr);
  std::lock_guard openClose(openCloseMutex);
  const auto it = imports.find(address);
  if (it == imports.end()) {
    return fail(
        orErrorInvalidDevicePointer, "orIpcCloseMemHandle: %p is not a pointer returned by orIpcOpenMemHandle", devPtr);
  }
  Import& import = it->second;
  if (import.opens > 1) {
    --import.opens;
    return orSuccess;
  }
  Device& dev = device(import.device);
  // As orFree: queued work that may touch the range finishes first.
  synchronizeDevice(dev.index);
  for (;;) {
    std::unique_lock lock(dev.mutex);
    uintptr_t base;
    Allocation* allocation = lookupAllocation(*currentAllocations(dev), address, 0, &base);
    const uint64_t uses = allocation->release();
    if (uses == 0) {
      // Unmapped below, once no copy that found the range is still running.
      removeAllocation(dev, address);
      break;
    }
    if (const uint32_t open = Allocation::openAccesses(uses); open != 0) {
      return fail(
          orErrorIllegalState,
          "orIpcCloseMemHandle: %p (%zu bytes) of device %d still has %u open host "
          "access(es); call orMemAccessEnd first",
          devPtr, import.size, dev.index, open);
    }
    lock.unlock();
    for (int index = 0; index < config->deviceCount; ++index)
      synchronizeDevice(index);
  }
  const size_t size = import.size;
  const uintptr_t hostBase = import.hostBase;
  {
    std::unique_lock lock(registryMutex);
    importsByIdentity.erase(import.identity);
    imports.erase(it);
    importedRangeCount.fetch_sub(1, std::memory_order_release);
  }
  munmap(devPtr, size);
  munmap(reinterpret_cast<void*>(hostBase), size);
  return orSuccess;
}
