#include "runtime/OpenRegStorage.h"

#include <algorithm>

#include <ATen/EmptyTensor.h>

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

void check_tensor_in_storage(const at::TensorBase& tensor, std::string_view op) {
  // No bytes are touched; a ZeroTensor has no memory by design.
  if (tensor.numel() == 0 || tensor._is_zerotensor()) {
    return;
  }
  // The common contiguous case without computeStorageNbytes' loop over
  // dimensions: this runs for every operand of every kernel.
  const size_t needed = tensor.is_contiguous()
      ? (static_cast<size_t>(tensor.storage_offset()) + static_cast<size_t>(tensor.numel())) * tensor.itemsize()
      : at::detail::computeStorageNbytes(tensor.sizes(), tensor.strides(), tensor.itemsize(), tensor.storage_offset());
  const size_t held = tensor.storage().nbytes();
  TORCH_CHECK(
      needed <= held, op, ": an ", tensor.device(), " tensor of sizes ", tensor.sizes(), ", strides ", tensor.strides(),
      " and storage offset ", tensor.storage_offset(), " needs ", needed, " bytes of its storage, which holds only ",
      held, " bytes (was the storage resized after the tensor was created?)");
}

}  // namespace c10::openreg
