#pragma once

#include <ATen/core/Tensor.h>

// Backend-private metadata on an openreg tensor (a c10::BackendMeta): a small
// integer tag, the kind of per-tensor state real backends keep there (an
// internal storage format, say). It travels with torch.save / torch.load.
namespace c10::openreg {

void set_tensor_tag(const at::Tensor& tensor, int64_t tag);
// 0 when the tensor carries no openreg metadata.
int64_t get_tensor_tag(const at::Tensor& tensor);

} // namespace c10::openreg
