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

// Replaces every tensor an operator argument or result holds by fn(tensor)
// (also inside Tensor[] and Tensor?[], keeping absent ones absent); other
// values pass through.
template <typename Fn>
c10::IValue map_tensors(const c10::IValue& value, Fn&& fn) {
  if (value.isTensor()) {
    return fn(value.toTensor());
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    out.reserve(value.toTensorList().size());
    for (const at::Tensor& t : value.toTensorList()) {
      out.push_back(fn(t));
    }
    return out;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(fn(*t)) : std::nullopt);
    }
    return out;
  }
  return value;
}

}  // namespace at::openreg
