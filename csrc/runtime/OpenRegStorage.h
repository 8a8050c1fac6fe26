#pragma once

#include <string_view>

#include <ATen/core/TensorBase.h>
#include <c10/core/StorageImpl.h>

namespace c10::openreg {

// Grows or shrinks a device storage to `nbytes`, keeping the leading bytes
// (resize_, set_, UntypedStorage.resize_).
void resize_bytes(c10::StorageImpl* storage, size_t nbytes);

// Before `op` reads or writes the bytes of an openreg tensor: they must lie
// inside its storage. A storage can shrink under its tensors
// (untyped_storage().resize_(0), as FSDP frees parameters); the tensor's
// range would then reach into whatever device memory follows the storage's
// block, which the runtime, seeing one live allocation, would let through.
void check_tensor_in_storage(const at::TensorBase& tensor, std::string_view op);

}  // namespace c10::openreg
