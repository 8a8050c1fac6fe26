#pragma once

#include <ATen/core/ivalue.h>

namespace at::openreg {

// Calls fn on every tensor an operator argument or result holds: a Tensor,
// or the tensors of a Tensor[] or Tensor?[] (skipping absent ones).
template <typename Fn>
void for_each_tensor(const c10::IValue& value, Fn&& fn) {
  if (value.isTensor()) {
    fn(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList()) {
      fn(t);
    }
  } else if (value.isOptionalTensorList()) {
    for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
      if (t.has_value()) {
        fn(*t);
      }
    }
  }
}

} // namespace at::openreg
