#pragma once

#include <c10/core/StorageImpl.h>

namespace c10::openreg {

// Grows or shrinks a device storage to `nbytes`, keeping the leading bytes
// (resize_, set_, UntypedStorage.resize_).
void resize_bytes(c10::StorageImpl* storage, size_t nbytes);

} // namespace c10::openreg
