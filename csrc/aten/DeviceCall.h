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
      : device_(common_device(op, args...)), guard_(device_) {}

  // For a caller that checked the device itself (the boxed fallback walks
  // the operator's stack with a DeviceCheck).
  explicit DeviceCall(c10::Device checked_device) : device_(checked_device), guard_(device_) {}

  c10::Device device() const {
    return device_;
  }

 private:
  c10::Device device_;
  c10::openreg::OpenRegGuard guard_;
};

// The host views of one DeviceCall (HostView.h), for a kernel that runs CPU
// code on openreg memory: host() maps a tensor, generator() the generator,
// finish() carries what the CPU code did to out= arguments back.
class HostCall {
 public:
  HostCall(const DeviceCall& call, std::string_view op) : device_(call.device()), views_(device_, op) {}

  // An openreg tensor becomes its host view; CPU and undefined ones pass.
  at::Tensor host(const at::Tensor& tensor) {
    return tensor.defined() && tensor.is_privateuseone() ? views_.alias(tensor) : tensor;
  }

  // Any argument: tensors become host views, the rest passes through.
  template <typename T>
  decltype(auto) argument(const T& value) {
    if constexpr (std::is_same_v<T, at::Tensor>) {
      return host(value);
    } else {
      return (value);
    }
  }

  // The CPU generator behind `generator` (the device's default one if none);
  // a generator of another device raises, as on CUDA.
  std::optional<at::Generator> generator(const std::optional<at::Generator>& generator) const {
    return c10::openreg::host_generator_for(generator, device_);
  }

  void finish() {
    views_.write_back();
  }

 private:
  c10::Device device_;
  HostViews views_;
};

} // namespace at::openreg
