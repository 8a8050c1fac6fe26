#pragma once

#include <cstddef>
#include <string>

#include <c10/core/StorageImpl.h>

// Sharing openreg storages between processes, with CUDA IPC's semantics
// (torch.multiprocessing's _share_cuda_ / _new_shared_cuda): the receiver
// maps the producer's device memory, and the producer keeps the block out of
// its caching allocator until every receiver has released it.
namespace c10::openreg {

// What is sent for one storage.
struct SharedStorage {
  c10::DeviceIndex device = -1;
  // orIpcMemHandle_t of the runtime allocation (a caching-allocator segment)
  // holding the storage, and where the storage lies in it.
  std::string memory;
  size_t offset = 0;
  size_t nbytes = 0;
  // orIpcMemHandle_t of the producer's page of reference counters (on its
  // device 0), and the byte offset of this storage's counter in it.
  std::string counter;
  size_t counter_offset = 0;
};

// Producer: describes a non-empty storage and counts one more receiver
// reference. The first call puts the storage's block behind a counted
// deleter; work queued on the device's current stream completes first, so the
// receiver reads what was written before the send.
SharedStorage share_storage(c10::StorageImpl& storage);

// Receiver: a non-resizable storage over the producer's memory (the same
// mapping for every storage of one allocation). Its deleter returns the
// reference counted by the send.
c10::intrusive_ptr<c10::StorageImpl> open_shared_storage(const SharedStorage& shared);

// Receiver that already holds the storage (torch's shared_cache hit): returns
// the reference the send counted. Best effort: nothing happens if the
// producer has exited.
void release_shared_reference(const std::string& counter, size_t counter_offset);

// torch.openreg.ipc_collect: returns to the allocator the producer blocks
// that were freed here and that every receiver has released since. Also runs
// whenever a shared storage is freed.
void ipc_collect();

// True for the memory of a storage received from another process.
bool is_received(const c10::DataPtr& data);

}  // namespace c10::openreg
