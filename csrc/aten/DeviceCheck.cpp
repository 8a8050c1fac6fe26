#include "aten/DeviceCheck.h"

#include "runtime/OpenRegFunctions.h"

namespace at::openreg {

void DeviceCheck::check(const at::Tensor& tensor, bool cpu_allowed) {
  if (!tensor.defined()) {
    return;
  }
  const c10::Device d = tensor.device();
  if (d.is_privateuseone()) {
    see(d);
  } else if (!(d.is_cpu() && (cpu_allowed || tensor.dim() == 0))) {
    mismatch(d);
  }
}

void DeviceCheck::check_written(const at::Tensor& tensor) {
  if (!tensor.defined()) {
    return;
  }
  const c10::Device d = tensor.device();
  if (d.is_privateuseone()) {
    see(d);
  } else {
    mismatch(d);
  }
}

void DeviceCheck::see(c10::Device d) {
  if (d.index() < 0) {
    d = c10::openreg::make_device(c10::openreg::current_device());
  }
  if (!device_) {
    device_ = d;
  } else if (*device_ != d) {
    mismatch(d);
  }
}

c10::Device DeviceCheck::device() const {
  // Not value_or: its argument, a runtime call, would run on every kernel call.
  return device_ ? *device_ : c10::openreg::make_device(c10::openreg::current_device());
}

void DeviceCheck::mismatch(c10::Device other) const {
  device_mismatch(op_name_, device(), other);
}

}  // namespace at::openreg
