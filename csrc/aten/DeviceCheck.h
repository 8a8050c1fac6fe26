#pragma once

#include <optional>
#include <string_view>
#include <type_traits>

#include <ATen/core/Tensor.h>

namespace at::openreg {

// PyTorch's message for tensors on two devices (CUDA raises it), naming the
// operator: every openreg kernel reports a mismatch through this. Inline, so
// that the separately loaded operator library (csrc/extra_ops) can use it
// without linking the backend.
[[noreturn]] inline void device_mismatch(std::string_view op, c10::Device device, c10::Device other) {
  TORCH_CHECK(
      false, "Expected all tensors to be on the same device, but found at least two devices, ", device, " and ", other,
      "! (when checking the arguments of ", op, ")");
}

// The device an operator runs on, checked the way CUDA checks it: every tensor
// argument on one openreg device, except 0-dim CPU tensors (scalars) and
// arguments the operator accepts on the CPU (cpu_allowed, e.g. the indices of
// advanced indexing), both only as inputs: an argument the operator writes
// (out=, the self of an in-place operator) is on the device whatever its
// dimension. A mismatch raises PyTorch's own message, so code that left a
// tensor on the CPU fails here as it would on a GPU.
class DeviceCheck {
 public:
  explicit DeviceCheck(std::string_view op_name) : op_name_(op_name) {}

  // An argument the operator only reads.
  void check(const at::Tensor& tensor, bool cpu_allowed = false);
  // An argument the operator writes.
  void check_written(const at::Tensor& tensor);
  // A device argument (factories).
  void see(c10::Device device);
  // The common device; the current openreg device if none was seen.
  c10::Device device() const;

 private:
  [[noreturn]] void mismatch(c10::Device other) const;

  std::string_view op_name_;
  std::optional<c10::Device> device_;
};

// Marks an argument of common_device() that the operator writes.
struct Written {
  const at::Tensor& tensor;
};

// DeviceCheck over an operator's arguments: tensors and optional tensors are
// checked as inputs, Written{tensor} as an output (undefined or absent ones
// skipped), other arguments ignored. Variadic rather than a list of tensors so
// that no argument is copied: a copy of a tensor only Python owns takes the
// GIL (see CpuAliases.h).
template <typename... Args>
c10::Device common_device(std::string_view op_name, const Args&... args) {
  DeviceCheck check(op_name);
  (
      [&] {
        if constexpr (std::is_same_v<Args, at::Tensor>) {
          check.check(args);
        } else if constexpr (std::is_same_v<Args, Written>) {
          check.check_written(args.tensor);
        } else if constexpr (std::is_same_v<Args, std::optional<at::Tensor>>) {
          if (args.has_value()) {
            check.check(*args);
          }
        }
      }(),
      ...);
  return check.device();
}

}  // namespace at::openreg
