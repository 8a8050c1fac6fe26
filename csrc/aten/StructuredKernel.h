#pragma once

#include <type_traits>

#include <ATen/EmptyTensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <c10/util/MaybeOwned.h>

#include "aten/CpuAliases.h"
#include "aten/DeviceCall.h"
#include "aten/HostAddresses.h"
#include "runtime/OpenRegDeviceAllocator.h"

namespace at::openreg {

// A structured operator's native class completed into a kernel: what torchgen
// generates for an in-tree backend (the structured_<op>_out_functional /
// _out / _inplace classes of RegisterCPU.cpp and RegisterCUDA.cpp), which an
// out-of-tree backend does not get and writes itself.
//
// The native class (at::native::structured_exp_out, ...) derives from the
// operator's meta class (at::meta::structured_exp) and adds impl(), libtorch's
// own implementation. The meta function reports the output's size, strides
// and dtype through set_output_raw_strided; this class then allocates the
// output in device memory (functional call) or checks and resizes the
// caller's tensor (out=, and in-place, where it is `self`). impl() then runs.
//
// `HostOutput` false: built over the openreg tensors (the stub kernels' direct
// path, StubKernels.cpp). true: the meta function sees host views only, the
// output included; a fresh output is openreg memory seen through a host view.
// `Op` names the native class (Op::Native) and whether its iterator casts
// outputs (Op::casts_outputs).
template <typename Op, bool HostOutput>
class StructuredKernel final : public Op::Native {
 public:
  using Native = typename Op::Native;

  // `out`: the out= tensor, `self` for an in-place call, undefined for a
  // functional call; borrowed (see CpuAliases.h for why no reference is taken).
  // `call`: the host views, for HostOutput.
  explicit StructuredKernel(const at::Tensor& out, CpuAliases* call = nullptr)
      : call_(call), device_out_(c10::MaybeOwned<at::Tensor>::borrowed(out)) {
    if constexpr (HostOutput) {
      host_out_ = call->alias(out);
    }
  }

  void set_output_strided(
      int64_t index, c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::TensorOptions options) override {
    set_output_raw_strided(index, sizes, strides, options);
  }

  void set_output_raw_strided(
      int64_t index, c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::TensorOptions options) override {
    if constexpr (!HostOutput && is_iterator) {
      // Decided here, once the inputs are known (the iterator sets its
      // outputs last); the output allocated next is in the common dtype.
      direct_ = needs_no_casts(Op::casts_outputs);
      if (!direct_) {
        // The host path will make this call again and lay the output out as
        // the CPU does (see StubKernels.cpp): leave the caller's tensor
        // alone, and give the iterator an empty placeholder, not memory.
        if (!device_out_->defined()) {
          device_out_ = c10::MaybeOwned<at::Tensor>::owned(
              at::detail::empty_generic(
                  {0}, c10::openreg::getDeviceAllocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                  options.dtype().toScalarType(), std::nullopt));
        }
        Native::set_output_raw_strided(index, sizes, strides, options);
        return;
      }
    }
    if (device_out_->defined()) {
      resize_out(output(), sizes, strides, options);
    } else {
      allocate_out(sizes, strides, options);
    }
    if constexpr (is_iterator) {
      Native::set_output_raw_strided(index, sizes, strides, options);
    }
  }

  const at::Tensor& maybe_get_output(int64_t /*index*/) override {
    return output();
  }

  // The output as the meta function and impl() see it.
  const at::Tensor& output() const {
    return HostOutput ? host_out_ : *device_out_;
  }

  // The openreg result: the caller's tensor, borrowed, for out= and in-place
  // calls; the fresh output for functional calls.
  c10::MaybeOwned<at::Tensor> take_result() {
    return std::move(device_out_);
  }

  // Whether the direct path can run, as decided while the iterator set the
  // output (needs_no_casts).
  bool direct() const {
    return direct_;
  }

  // The direct path: points every openreg operand at the host view of its
  // memory, casts CPU scalars of another dtype to the common one and labels
  // all operands CPU ones. libtorch's impl() calls the stub for the
  // iterator's device type, so it then runs the CPU kernel of the stub, on
  // device memory, without openreg calling the stub itself (whose inline call
  // path depends on libtorch's CPU-capability build macros, see
  // docs/operators.md).
  void point_operands_at_host(HostAddresses& addresses) {
    addresses.point_at_host(*this);
    for (int i = 0; i < this->ntensors(); ++i) {
      if (!this->tensor_base(i).is_privateuseone() && this->dtype(i) != this->common_dtype()) {
        cast_cpu_scalar(i);
      }
      this->operands_[i].device = c10::Device(c10::kCPU);
    }
  }

 private:
  static constexpr bool is_iterator = std::is_base_of_v<at::TensorIteratorBase, Native>;

  // True if the CPU loops can run on this iterator's operands: all openreg
  // tensors in the common dtype (outputs too, for operators whose iterator
  // casts its outputs), or 0-dim CPU inputs (scalars, such as the wrapped
  // number of `x.mul_(0.9)`) of any dtype, which point_operands_at_host casts
  // as the CPU's iterator does. An output not set yet (while the iterator is
  // being built) does not count.
  bool needs_no_casts(bool casts_outputs) const {
    const std::optional<c10::ScalarType> common = this->maybe_common_dtype();
    if (!common) {
      return false;
    }
    for (int i = 0; i < this->ntensors(); ++i) {
      const bool is_output = i < this->noutputs();
      const at::TensorBase& operand = this->tensor_base(i);
      if (is_output && !operand.defined()) {
        continue;
      }
      if (!operand.is_privateuseone()) {
        if (is_output || !operand.is_cpu() || operand.dim() != 0) {
          return false;
        }
        continue;
      }
      if ((!is_output || casts_outputs) && this->dtype(i) != *common) {
        return false;
      }
    }
    return true;
  }

  // What the iterator does to a CPU input of another dtype when its common
  // device is the CPU, and only then (every stub operator's iterator promotes
  // its inputs): a temporary in the common dtype, the original kept, since
  // some loops read a reduced-precision operation's scalar from it
  // (original_scalar_value: the CPU's mul of a half tensor by 0.1).
  void cast_cpu_scalar(int index) {
    at::OperandInfo& operand = this->operands_[index];
    operand.exchange_tensor(c10::MaybeOwned<at::TensorBase>::owned(operand.tensor().to(this->common_dtype())));
    operand.current_dtype = operand.target_dtype = this->common_dtype();
    this->unsafe_replace_operand(index, operand.tensor_base().data_ptr());
  }

  // What the meta function asked for, applied to an existing tensor (out=,
  // in-place): a dtype check and resize_output. Strides are advice, applied
  // only to a tensor that had to be resized anyway (as torchgen's code does).
  static void resize_out(
      const at::Tensor& out, c10::IntArrayRef sizes, c10::IntArrayRef strides, const c10::TensorOptions& options) {
    TORCH_CHECK(
        options.dtype() == out.dtype(), "Expected out tensor to have dtype ", options.dtype(), ", but got ",
        out.dtype(), " instead");
    if (at::native::resize_output(out, sizes)) {
      if (!strides.empty()) {
        out.as_strided_(sizes, strides);
      } else if (options.memory_format_opt().has_value()) {
        out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
      }
    }
  }

  // As the CPU's structured kernels create outputs, in device memory.
  void allocate_out(c10::IntArrayRef sizes, c10::IntArrayRef strides, const c10::TensorOptions& options) {
    const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
    c10::Allocator* allocator = c10::openreg::getDeviceAllocator();
    device_out_ = c10::MaybeOwned<at::Tensor>::owned(
        strides.empty()
            ? at::detail::empty_generic(
                  sizes, allocator, keys, options.dtype().toScalarType(), options.memory_format_opt())
            : at::detail::empty_strided_generic(sizes, strides, allocator, keys, options.dtype().toScalarType()));
    if constexpr (HostOutput) {
      host_out_ = call_->alias(*device_out_);
    }
  }

  CpuAliases* call_;
  bool direct_ = false;
  c10::MaybeOwned<at::Tensor> device_out_;
  at::Tensor host_out_;  // the host views' output
};

}  // namespace at::openreg
