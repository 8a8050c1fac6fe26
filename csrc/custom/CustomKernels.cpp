// CPU and openreg kernels of the `openreg` custom operators, registered by
// the code generated from torch_openreg/ops/operators.yaml.
//
// An openreg kernel runs the CPU kernel on host views of its arguments
// (CpuAliases): device memory is never read through a device address. The
// out= kernels call write_back(), which carries a resize of `out` back to the
// openreg tensor.
#include <string_view>

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/tanh.h>

#include "aten/CpuAliases.h"
#include "aten/DeviceCall.h"

namespace at::openreg {
namespace {

void check_out(std::string_view op, const at::Tensor& self, const at::Tensor& out, c10::ScalarType dtype) {
  if (out.device() != self.device()) {
    device_mismatch(op, self.device(), out.device());
  }
  TORCH_CHECK(
      out.scalar_type() == dtype, op, ": expected out to have dtype ", dtype, " for self of dtype ", self.scalar_type(),
      ", but got ", out.scalar_type());
}

void check_floating(std::string_view op, const at::Tensor& self) {
  TORCH_CHECK(
      at::isFloatingType(self.scalar_type()), op, ": expected a floating-point tensor, but got ", self.scalar_type(),
      " on ", self.device());
}

}  // namespace

// CPU kernels.

at::Tensor custom_abs_cpu(const at::Tensor& self) {
  return at::abs(self);
}

at::Tensor& custom_abs_out_cpu(const at::Tensor& self, at::Tensor& out) {
  check_out("openreg::custom_abs.out", self, out, c10::toRealValueType(self.scalar_type()));
  return at::abs_out(out, self);
}

at::Tensor scaled_tanh_cpu(const at::Tensor& self, double scale) {
  check_floating("openreg::scaled_tanh", self);
  return at::tanh(self * scale);
}

at::Tensor& scaled_tanh_out_cpu(const at::Tensor& self, double scale, at::Tensor& out) {
  check_floating("openreg::scaled_tanh.out", self);
  check_out("openreg::scaled_tanh.out", self, out, self.scalar_type());
  return at::tanh_out(out, self * scale);
}

// openreg kernels: the CPU kernels above, on host views, after the device
// check every openreg kernel makes (DeviceCall). The other arguments are
// checked on the device tensors too: errors should name the device rather
// than a host view.

at::Tensor custom_abs_openreg(const at::Tensor& self) {
  const DeviceCall call("openreg::custom_abs", self);
  CpuAliases views(call);
  return views.to_device(custom_abs_cpu(views.alias(self)));
}

at::Tensor& custom_abs_out_openreg(const at::Tensor& self, at::Tensor& out) {
  const DeviceCall call("openreg::custom_abs.out", self, Written{out});
  check_out(call.op(), self, out, c10::toRealValueType(self.scalar_type()));
  CpuAliases views(call);
  at::Tensor host_out = views.alias(out);
  custom_abs_out_cpu(views.alias(self), host_out);
  views.write_back();
  return out;
}

at::Tensor scaled_tanh_openreg(const at::Tensor& self, double scale) {
  const DeviceCall call("openreg::scaled_tanh", self);
  check_floating(call.op(), self);
  CpuAliases views(call);
  return views.to_device(scaled_tanh_cpu(views.alias(self), scale));
}

at::Tensor& scaled_tanh_out_openreg(const at::Tensor& self, double scale, at::Tensor& out) {
  const DeviceCall call("openreg::scaled_tanh.out", self, Written{out});
  check_floating(call.op(), self);
  check_out(call.op(), self, out, self.scalar_type());
  CpuAliases views(call);
  at::Tensor host_out = views.alias(out);
  scaled_tanh_out_cpu(views.alias(self), scale, host_out);
  views.write_back();
  return out;
}

}  // namespace at::openreg
