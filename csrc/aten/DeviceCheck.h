#pragma once


#include <initializer_list>
#include <optional>
#include <string_view>

#include <ATen/core/Tensor.h>

namespace at::openreg {

// The device an operator runs on, checked the way CUDA checks it: every tensor
// argument on one openreg device, except 0-dim CPU tensors (scalars) and
// arguments the operator accepts on the CPU (cpu_allowed, e.g. the indices of
// advanced indexing). A mismatch raises PyTorch's own message, so code that
// left a tensor on the CPU fails here as it would on a GPU.
class DeviceCheck {
 public:
  explicit DeviceCheck(std::string_view op_name) : op_name_(op_name) {}

  void check(const at::Tensor& tensor, bool cpu_allowed = false);
  // A device argument (factories).
  void see(c10::Device device);
  // The common device; the current openreg device if none was seen.
  c10::Device device() const;

 private:
  [[noreturn]] void mismatch(c10::Device other) const;

  std::string_view op_name_;
  std::optional<c10::Device> device_;
};

// DeviceCheck over a fixed list of tensor arguments (undefined ones skipped).
c10::Device common_device(
    std::string_view op_name,
    std::initializer_list<at::Tensor> tensors);

} // namespace at::openreg
