#pragma once

// The DispatchStub operators openreg runs on its direct path (StubKernels.cpp
// registers them; ForeachKernels.cpp runs them per tensor of a list) and the
// one call of such an operator on a device both share.
#include <ATen/TensorIterator.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/clamp_min_native.h>
#include <ATen/ops/leaky_relu_native.h>
#include <ATen/ops/addcdiv_native.h>
#include <ATen/ops/addcmul_native.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/eq_native.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/lerp_native.h>
#include <ATen/ops/log_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/sigmoid_native.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/tanh_native.h>

#include "aten/CpuAliases.h"
#include "aten/DeviceCall.h"
#include "aten/HostAddresses.h"
#include "aten/StructuredKernel.h"

namespace at::openreg {

// The operators: libtorch's native class, whether its iterator casts outputs
// (false for comparisons, whose bool output the loops write directly),
// whether openreg fills the operator's stub itself (DeviceStubKernels.cpp;
// otherwise the iterator's operands are labelled CPU ones and the CPU's
// kernel of the stub runs) and the three overload names.
#define OPENREG_OPERATOR(NAME, NATIVE, CASTS_OUTPUTS, DEVICE_STUB, FUNCTIONAL, IN_PLACE, OUT) \
  struct NAME##_op {                                                                          \
    using Native = at::native::NATIVE;                                                        \
    static constexpr bool casts_outputs = CASTS_OUTPUTS;                                      \
    static constexpr bool device_stub = DEVICE_STUB;                                          \
    static constexpr const char* functional = FUNCTIONAL;                                     \
    static constexpr const char* in_place = IN_PLACE;                                         \
    static constexpr const char* out = OUT;                                                   \
  };
#define OPENREG_STUB_OPERATOR(NAME, NATIVE, CASTS_OUTPUTS, FUNCTIONAL, IN_PLACE, OUT) \
  OPENREG_OPERATOR(NAME, NATIVE, CASTS_OUTPUTS, false, FUNCTIONAL, IN_PLACE, OUT)
#define OPENREG_UNARY_OPERATOR(NAME) \
  OPENREG_STUB_OPERATOR(NAME, structured_##NAME##_out, true, "aten::" #NAME, "aten::" #NAME "_", "aten::" #NAME ".out")

OPENREG_UNARY_OPERATOR(neg)
OPENREG_UNARY_OPERATOR(exp)
OPENREG_UNARY_OPERATOR(log)
OPENREG_UNARY_OPERATOR(sqrt)
OPENREG_UNARY_OPERATOR(sin)
OPENREG_UNARY_OPERATOR(cos)
OPENREG_UNARY_OPERATOR(tanh)
OPENREG_UNARY_OPERATOR(sigmoid)
// add is a ufunc in native_functions.yaml: its native class is generated per
// device; the CPU's calls add_stub like the others.
OPENREG_STUB_OPERATOR(add, structured_ufunc_add_CPU, true, "aten::add.Tensor", "aten::add_.Tensor", "aten::add.out")
OPENREG_STUB_OPERATOR(sub, structured_sub_out, true, "aten::sub.Tensor", "aten::sub_.Tensor", "aten::sub.out")
OPENREG_STUB_OPERATOR(mul, structured_mul_out, true, "aten::mul.Tensor", "aten::mul_.Tensor", "aten::mul.out")
OPENREG_STUB_OPERATOR(div, structured_div_out, true, "aten::div.Tensor", "aten::div_.Tensor", "aten::div.out")
OPENREG_STUB_OPERATOR(eq, structured_eq_Tensor_out, false, "aten::eq.Tensor", "aten::eq_.Tensor", "aten::eq.Tensor_out")
// The pointwise updates of optimizers (Adam's moments and step): one call per
// parameter per step, where the boxed fallback's fixed cost dominated.
OPENREG_STUB_OPERATOR(addcmul, structured_addcmul_out, true, "aten::addcmul", "aten::addcmul_", "aten::addcmul.out")
OPENREG_STUB_OPERATOR(addcdiv, structured_addcdiv_out, true, "aten::addcdiv", "aten::addcdiv_", "aten::addcdiv.out")
OPENREG_STUB_OPERATOR(
    lerp_scalar, structured_lerp_Scalar, true, "aten::lerp.Scalar", "aten::lerp_.Scalar", "aten::lerp.Scalar_out")
OPENREG_STUB_OPERATOR(
    lerp_tensor, structured_lerp_Tensor, true, "aten::lerp.Tensor", "aten::lerp_.Tensor", "aten::lerp.Tensor_out")
// Operators whose stub openreg fills (DeviceStubKernels.cpp): a binary one
// with a scalar operand and an activation.
OPENREG_OPERATOR(
    clamp_min, structured_clamp_min_out, true, true, "aten::clamp_min", "aten::clamp_min_", "aten::clamp_min.out")
OPENREG_OPERATOR(
    leaky_relu, structured_leaky_relu_out, true, true, "aten::leaky_relu", "aten::leaky_relu_", "aten::leaky_relu.out")
#undef OPENREG_UNARY_OPERATOR
#undef OPENREG_STUB_OPERATOR
#undef OPENREG_OPERATOR

// One call of operator `Op` on the device of `call`, whose device checks are
// done. `out` is the out= tensor, `self` for in-place, undefined for
// functional; returns the openreg result. The direct path reaches memory
// through `addresses`, which a foreach kernel shares across its tensors; the
// host path closes them first (CpuAliases launches and opens on its own).
template <typename Op, typename... Rest>
c10::MaybeOwned<at::Tensor> run_stub(
    const DeviceCall& call, HostAddresses& addresses, const at::Tensor& out, const at::Tensor& self,
    const Rest&... rest) {
  StructuredKernel<Op, /*HostOutput=*/false> direct(out);
  direct.meta(self, rest...);
  if (direct.direct()) {
    if constexpr (Op::device_stub) {
      // impl() calls openreg's kernel of the stub, which reaches device
      // memory itself (and, as the CPU's, refuses dtypes it has no loop for,
      // also for empty tensors).
      direct.impl(self, rest..., direct.output());
      return direct.take_result();
    }
    // Nothing to compute or write: skip the kernel, whose CPU loop may still
    // read an empty broadcast operand as a scalar (mul of half tensors reads
    // operand 2 through a pointer that is not an element of any tensor).
    if (direct.numel() == 0 && direct.tensor_base(0).numel() == 0) {
      return direct.take_result();
    }
    direct.point_operands_at_host(addresses);
    direct.impl(self, rest..., direct.output());
    return direct.take_result();
  }
  // The host path decides the output's size and layout itself, as the CPU
  // does: its iterator orders dimensions by the strides of the casting
  // temporaries it makes for promoted inputs (an expanded operand cast to the
  // common dtype becomes contiguous), which the direct attempt, over the
  // uncast inputs, could not see. That attempt left `out` untouched.
  addresses.close();
  CpuAliases host_call(call);
  StructuredKernel<Op, /*HostOutput=*/true> host(out, &host_call);
  const at::Tensor host_self = host_call.alias(self);
  host.meta(host_self, host_call.argument(rest)...);
  host.impl(host_self, host_call.argument(rest)..., host.output());
  host_call.write_back();
  return host.take_result();
}

}  // namespace at::openreg
