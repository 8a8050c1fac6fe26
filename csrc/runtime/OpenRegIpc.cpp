#include "runtime/OpenRegIpc.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGuard.h"
#include "runtime/OpenRegPluggableAllocator.h"
#include "runtime/OpenRegStream.h"

// How references are counted across processes (CUDA's scheme, on openreg
// memory): each shared storage of the producer owns one int64 counter, the
// number of receiver references still out. A send adds 1; a receiver
// subtracts 1 when its storage dies, or at once if it already held the
// storage. The producer frees the block when its own storage dies with the
// counter at 0; otherwise the block waits in a list ("limbo") that
// ipc_collect() sweeps. The counters live in pages of the producer's device 0
// memory (every process has a device 0, so a receiver that cannot open the
// data can still return its reference), which receivers open through the
// runtime's IPC like the data itself: no named shared-memory file can outlive
// a killed process, and a receiver that opened the page can still count down
// after the producer exited.
namespace c10::openreg {

namespace {

constexpr size_t kCounterPageBytes = 4096;
constexpr size_t kCountersPerPage = kCounterPageBytes / sizeof(int64_t);

std::string handle_bytes(const orIpcMemHandle_t& handle) {
  return std::string(handle.reserved, sizeof handle.reserved);
}

orIpcMemHandle_t to_handle(const std::string& bytes, const char* what) {
  TORCH_CHECK_VALUE(
      bytes.size() == sizeof(orIpcMemHandle_t), "openreg: the ", what, " handle of a shared storage must be ",
      sizeof(orIpcMemHandle_t), " bytes, got ", bytes.size());
  orIpcMemHandle_t handle;
  std::memcpy(handle.reserved, bytes.data(), sizeof handle.reserved);
  return handle;
}

// Adds delta to a counter in device memory (through a scoped host access:
// the page is protected like any other) and returns the new value, or -1 if
// the runtime refused the access. Never throws: deleters call it.
int64_t add_to_counter(void* counter, int64_t delta) noexcept {
  void* host = nullptr;
  if (orMemAccessBegin(counter, sizeof(int64_t), &host) != orSuccess) {
    return -1;
  }
  const int64_t value = std::atomic_ref<int64_t>(*static_cast<int64_t*>(host)).fetch_add(delta) + delta;
  orMemAccessEnd(counter);
  return value;
}

int64_t counter_value(void* counter) noexcept {
  return add_to_counter(counter, 0);
}

struct CounterPage {
  void* memory = nullptr;  // orMalloc'd, kept for the life of the process
  std::string handle;
  std::vector<size_t> free_slots;
};

// A producer storage that has been sent: the allocator's block and its counter.
struct SentBlock {
  c10::DataPtr original;
  CounterPage* page = nullptr;
  size_t slot = 0;
  void* counter() const {
    return static_cast<char*>(page->memory) + slot * sizeof(int64_t);
  }
};

// Guards the counter pages and limbo. Never held while a block is freed.
std::mutex g_mutex;
std::vector<std::unique_ptr<CounterPage>> g_pages;
std::unordered_map<std::string, CounterPage*> g_pages_by_handle;
std::vector<std::unique_ptr<SentBlock>> g_limbo;

// With g_mutex held: a counter at 0 (fresh device pages read as zero, and a
// counter is returned only once it is back at 0).
std::pair<CounterPage*, size_t> take_counter() {
  CounterPage* page = nullptr;
  for (const auto& candidate : g_pages) {
    if (!candidate->free_slots.empty()) {
      page = candidate.get();
      break;
    }
  }
  if (page == nullptr) {
    auto fresh = std::make_unique<CounterPage>();
    OpenRegGuard guard(c10::DeviceIndex{0});
    OPENREG_CHECK(orMalloc(&fresh->memory, kCounterPageBytes));
    orIpcMemHandle_t handle;
    OPENREG_CHECK(orIpcGetMemHandle(&handle, fresh->memory));
    fresh->handle = handle_bytes(handle);
    for (size_t slot = kCountersPerPage; slot > 0; --slot) {
      fresh->free_slots.push_back(slot - 1);
    }
    page = fresh.get();
    g_pages_by_handle.emplace(page->handle, page);
    g_pages.push_back(std::move(fresh));
  }
  const size_t slot = page->free_slots.back();
  page->free_slots.pop_back();
  return {page, slot};
}

bool in_forked_child() noexcept {
  // The runtime refuses service in a child forked after it started; such a
  // child must not touch counters or locks a parent thread may have held.
  return device_count_ensure_non_throwing() == 0;
}

void delete_sent(void* context) {
  std::unique_ptr<SentBlock> sent(static_cast<SentBlock*>(context));
  if (in_forked_child()) {
    (void)sent.release();  // the parent's block
    return;
  }
  if (counter_value(sent->counter()) == 0) {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      sent->page->free_slots.push_back(sent->slot);
    }
    sent.reset();  // the block returns to the caching allocator, outside the lock
  } else {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_limbo.push_back(std::move(sent));
  }
  ipc_collect();
}

// The receiver's hold on a producer's storage.
struct ReceivedBlock {
  c10::DeviceIndex device;
  void* memory;  // orIpcOpenMemHandle'd allocation
  void* counter_page;  // orIpcOpenMemHandle'd counter page
  size_t counter_offset;
};

void delete_received(void* context) {
  std::unique_ptr<ReceivedBlock> received(static_cast<ReceivedBlock*>(context));
  if (in_forked_child()) {
    return;
  }
  // As CUDA's receiver does: work queued on the current stream finishes
  // before the producer may reuse the block.
  try {
    getCurrentOpenRegStream(received->device).synchronize();
  } catch (...) {
    std::fprintf(stderr, "openreg: could not synchronize before releasing a shared storage\n");
  }
  orIpcCloseMemHandle(received->memory);
  add_to_counter(static_cast<char*>(received->counter_page) + received->counter_offset, -1);
  orIpcCloseMemHandle(received->counter_page);
}

}  // namespace

SharedStorage share_storage(c10::StorageImpl& storage) {
  // The counted deleter wraps a caching-allocator block; a pluggable
  // allocator's memory is not a runtime IPC segment the cache tracks.
  refuseIfPluggable("Sharing openreg tensors between processes");
  TORCH_CHECK(storage.device_type() == c10::DeviceType::PrivateUse1, "share_storage: not an openreg storage");
  const c10::DataPtr& data = storage.data_ptr();
  TORCH_CHECK(
      !is_received(data),
      "Attempted to send an openreg tensor received from another process; this is not currently supported. "
      "Consider cloning before sending.");
  TORCH_CHECK(data.get() != nullptr && storage.nbytes() > 0, "share_storage: the storage is empty");
  const c10::Device device = storage.device();
  OpenRegGuard guard(device);
  getCurrentOpenRegStream(device.index()).synchronize();
  ipc_collect();

  orPointerAttributes attributes{};
  OPENREG_CHECK(orPointerGetAttributes(&attributes, data.get()));
  orIpcMemHandle_t memory;
  OPENREG_CHECK(orIpcGetMemHandle(&memory, data.get()));

  if (data.get_deleter() != &delete_sent) {
    // First send: the block goes behind a counted deleter. The storage keeps
    // its pointer and allocator; only what happens at its free changes.
    auto sent = std::make_unique<SentBlock>();
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      std::tie(sent->page, sent->slot) = take_counter();
    }
    SentBlock* raw = sent.get();
    void* ptr = data.get();
    raw->original = storage.set_data_ptr(c10::DataPtr(ptr, sent.release(), &delete_sent, device));
  }
  const auto* sent = static_cast<const SentBlock*>(storage.data_ptr().get_context());
  add_to_counter(sent->counter(), 1);

  SharedStorage shared;
  shared.device = device.index();
  shared.memory = handle_bytes(memory);
  shared.offset =
      static_cast<size_t>(static_cast<char*>(storage.data_ptr().get()) - static_cast<char*>(attributes.basePointer));
  shared.nbytes = storage.nbytes();
  shared.counter = sent->page->handle;
  shared.counter_offset = sent->slot * sizeof(int64_t);
  return shared;
}

c10::intrusive_ptr<c10::StorageImpl> open_shared_storage(const SharedStorage& shared) {
  const orIpcMemHandle_t memory_handle = to_handle(shared.memory, "memory");
  const orIpcMemHandle_t counter_handle = to_handle(shared.counter, "counter");
  TORCH_CHECK_VALUE(
      shared.counter_offset % sizeof(int64_t) == 0 && shared.counter_offset < kCounterPageBytes,
      "openreg: invalid counter offset ", shared.counter_offset, " of a shared storage");
  // The runtime names the device, the process and what went wrong (a device
  // this process does not have, a producer that has exited).
  void* memory = nullptr;
  if (const orError_t error = orIpcOpenMemHandle(&memory, memory_handle, 0); error != orSuccess) {
    const std::string message = orGetLastErrorMessage();
    // The producer may still be alive (a device this process lacks): it
    // must not hold the block for a receiver that never got it.
    release_shared_reference(shared.counter, shared.counter_offset);
    TORCH_CHECK(false, "openreg runtime error ", orGetErrorName(error), ": ", message);
  }
  void* counter_page = nullptr;
  const orError_t counter_error = orIpcOpenMemHandle(&counter_page, counter_handle, 0);
  if (counter_error != orSuccess) {
    const std::string message = orGetLastErrorMessage();
    orIpcCloseMemHandle(memory);
    TORCH_CHECK(false, "openreg runtime error ", orGetErrorName(counter_error), ": ", message);
  }
  auto received =
      std::make_unique<ReceivedBlock>(ReceivedBlock{shared.device, memory, counter_page, shared.counter_offset});
  orPointerAttributes attributes{};
  const orError_t error = orPointerGetAttributes(&attributes, memory);
  if (error != orSuccess || shared.offset > attributes.allocationSize ||
      shared.nbytes > attributes.allocationSize - shared.offset) {
    delete_received(received.release());
    TORCH_CHECK_VALUE(
        false, "openreg: a shared storage of ", shared.nbytes, " bytes at offset ", shared.offset,
        " does not fit in the ", attributes.allocationSize, "-byte allocation it names");
  }
  const c10::Device device(c10::DeviceType::PrivateUse1, shared.device);
  c10::DataPtr data(static_cast<char*>(memory) + shared.offset, received.release(), &delete_received, device);
  // Not resizable: growing would write past the storage into the producer's
  // other blocks (see torch's Note [CUDA IPC and the caching allocator]).
  return c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), shared.nbytes, std::move(data), /*allocator=*/nullptr,
      /*resizable=*/false);
}

void release_shared_reference(const std::string& counter, size_t counter_offset) {
  TORCH_CHECK_VALUE(
      counter_offset % sizeof(int64_t) == 0 && counter_offset < kCounterPageBytes, "openreg: invalid counter offset ",
      counter_offset, " of a shared storage");
  {
    // A storage sent to this very process (a queue read by its writer).
    std::lock_guard<std::mutex> lock(g_mutex);
    const auto own = g_pages_by_handle.find(counter);
    if (own != g_pages_by_handle.end()) {
      add_to_counter(static_cast<char*>(own->second->memory) + counter_offset, -1);
      return;
    }
  }
  void* page = nullptr;
  if (orIpcOpenMemHandle(&page, to_handle(counter, "counter"), 0) == orSuccess) {
    add_to_counter(static_cast<char*>(page) + counter_offset, -1);
    orIpcCloseMemHandle(page);
  }
}

void ipc_collect() {
  std::vector<std::unique_ptr<SentBlock>> released;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (auto& sent : g_limbo) {
      if (counter_value(sent->counter()) == 0) {
        sent->page->free_slots.push_back(sent->slot);
        released.push_back(std::move(sent));
      }
    }
    std::erase(g_limbo, nullptr);
  }
  // `released` frees the blocks here, outside the lock.
}

bool is_received(const c10::DataPtr& data) {
  return data.get_deleter() == &delete_received;
}

}  // namespace c10::openreg
