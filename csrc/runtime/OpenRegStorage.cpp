#include "runtime/OpenRegStorage.h"

#include <algorithm>

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegGuard.h"

namespace c10::openreg {

void resize_bytes(c10::StorageImpl* storage, size_t nbytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  c10::Allocator* allocator = storage->allocator();
  TORCH_CHECK(allocator != nullptr, "Trying to resize storage without an allocator");
  // Allocate on the storage's device, whatever device is current.
  OpenRegGuard guard(storage->device());
  c10::DataPtr data = allocator->allocate(nbytes);
  const size_t kept = std::min(storage->nbytes(), nbytes);
  if (kept > 0) {
    OPENREG_CHECK(orMemcpy(data.get(), storage->data(), kept, orMemcpyDeviceToDevice));
  }
  storage->set_data_ptr_noswap(std::move(data));
  storage->set_nbytes(nbytes);
}

} // namespace c10::openreg
