#pragma once

#include <optional>
#include <string_view>
#include <type_traits>

#include <ATen/core/Tensor.h>

#include "aten/DeviceCheck.h"
#include "aten/HostView.h"
#include "runtime/OpenRegGenerator.h"
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
// so that no tensor is copied (see HostView.h for why copies cost the GIL).
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

// The host views of one DeviceCall (HostView.h), for a kernel that runs CPU
// code on openreg memory: alias() maps a tensor, generator() the generator,
// write_back() carries what the CPU code did to out= arguments back, and
// to_device() maps a result.
class HostCall {
 public:
  explicit HostCall(const DeviceCall& call) : device_(call.device()), views_(device_, call.op()) {}

  // An openreg tensor becomes its host view; CPU and undefined ones pass.
  at::Tensor alias(const at::Tensor& tensor) {
    return tensor.defined() && tensor.is_privateuseone() ? views_.alias(tensor) : tensor;
  }

  // Any argument: tensors become host views, the rest passes through.
  template <typename T>
  decltype(auto) argument(const T& value) {
    if constexpr (std::is_same_v<T, at::Tensor>) {
      return alias(value);
    } else {
      return (value);
    }
  }

  // The CPU generator behind `generator` (the device's default one if none);
  // a generator of another device raises, as on CUDA.
  std::optional<at::Generator> generator(const std::optional<at::Generator>& generator) const {
    return c10::openreg::host_generator_for(generator, device_);
  }

  void write_back() {
    views_.write_back();
  }

  at::Tensor to_device(const at::Tensor& host_result) {
    return views_.to_device(host_result);
  }

 private:
  c10::Device device_;
  HostViews views_;
};

} // namespace at::openreg
