#pragma once

#include <optional>
#include <string_view>

#include <ATen/core/Tensor.h>

#include "aten/DeviceCheck.h"
#include "runtime/OpenRegGuard.h"

namespace at::openreg {

// What every openreg kernel does first, as one RAII object: check that its
// tensor arguments are on one openreg device (CUDA's rule, DeviceCheck.h) and
// make that device current until the kernel returns. Out-of-tree kernels get
// no generated device guard, so a kernel that allocates without this would
// allocate on whatever device the caller had current.
//
// `args`: the operator's arguments; tensors and optional tensors are checked
// as inputs, Written{tensor} as an argument the operator writes (out=, the
// self of an in-place operator), anything else is ignored. Passed variadically
// so that no tensor is copied (see CpuAliases.h for why copies cost the GIL).
class DeviceCall {
 public:
  template <typename... Args>
  explicit DeviceCall(std::string_view op, const Args&... args)
      : op_(op), device_(common_device(op, args...)), guard_(device_) {}

  // For a caller that chose the device itself: the boxed fallback, which
  // checks the operator's stack with a DeviceCheck, and device-generic
  // kernels, which run on the device of their first openreg argument.
  DeviceCall(std::string_view op, c10::Device device) : op_(op), device_(device), guard_(device_) {}

  std::string_view op() const {
    return op_;
  }

  c10::Device device() const {
    return device_;
  }

 private:
  std::string_view op_;  // the operator's name, for errors
  c10::Device device_;
  c10::openreg::OpenRegGuard guard_;
};

}  // namespace at::openreg
