// DispatchStub kernels: how a backend plugs into ATen's TensorIterator
// operators (unary float functions, binary arithmetic, a comparison, a
// reduction) instead of the fallback.
//
// Two registrations are needed per operator, because a stub is only reached
// from inside the operator that calls it:
//   1. the operator's `.out` overload, registered for PrivateUse1. It checks
//      devices as CUDA does, then builds the TensorIterator over host views of
//      the openreg memory (HostViews): for a structured operator, its meta
//      class completed the way PyTorch's generated code completes it for its
//      own backends (OutKernel below). Building over host views matters: the
//      iterator inserts its dtype-casting temporaries only for CPU tensors
//      (CUDA kernels cast while loading; CPU loops do not cast at all). Then
//      the stub is called for PrivateUse1. The functional and in-place
//      overloads reach `.out` through PyTorch's default PrivateUse1 kernels.
//   2. the stub's PrivateUse1 kernel (REGISTER_PRIVATEUSE1_DISPATCH): the CPU
//      kernel of the same stub, so the same vectorized loops run on the same
//      memory as on the CPU, bit-identical results, no copy.

// DispatchStub's inline call path passes one kernel pointer per CPU
// capability that libtorch was built with, so this file must see the same
// capability macros as libtorch itself; PyTorch's x86-64 builds define these.
#if defined(__x86_64__)
#define HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#endif

#include <ATen/SDPBackend.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/ReduceOps.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/real.h>
#include <ATen/ops/add_meta.h>
#include <ATen/ops/cos_meta.h>
#include <ATen/ops/div_meta.h>
#include <ATen/ops/eq_meta.h>
#include <ATen/ops/exp_meta.h>
#include <ATen/ops/log_meta.h>
#include <ATen/ops/mul_meta.h>
#include <ATen/ops/neg_meta.h>
#include <ATen/ops/sigmoid_meta.h>
#include <ATen/ops/sin_meta.h>
#include <ATen/ops/sqrt_meta.h>
#include <ATen/ops/sub_meta.h>
#include <ATen/ops/sum_meta.h>
#include <ATen/ops/tanh_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/DeviceCheck.h"
#include "aten/HostView.h"

namespace at::openreg {
namespace {

// The PrivateUse1 kernel of a stub: the CPU kernel of the same stub. Its
// iterator must be over host views (see above); one over openreg tensors
// would hand CPU loops uncast operands, so it is refused.
template <auto& Stub, typename Iterator, typename... Args>
void on_host(Iterator& iter, Args... args) {
  for (int i = 0; i < iter.ntensors(); ++i) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        !iter.tensor_base(i).is_privateuseone(),
        "openreg stub kernels run on TensorIterators built over host views of device memory "
        "(see csrc/aten/StubKernels.cpp); got one over openreg tensors");
  }
  Stub(c10::DeviceType::CPU, iter, args...);
}

// One stub-backed call: the device check, the device guard, and host views of
// the openreg arguments; finish() carries a resize of `out` back.
class HostCall {
 public:
  HostCall(std::string_view op, std::initializer_list<at::Tensor> tensors)
      : device_(common_device(op, tensors)), guard_(device_), views_(device_, op) {}

  at::Tensor host(const at::Tensor& t) {
    return t.defined() && t.is_privateuseone() ? views_.alias(t) : t;
  }

  void finish() {
    views_.write_back();
  }

 private:
  c10::Device device_;
  c10::DeviceGuard guard_;
  HostViews views_;
};

// A structured operator's meta class completed into an out= kernel, as
// PyTorch's generated code does for its in-tree backends: the meta function
// reports the output's size, strides and dtype through set_output_*, and this
// resizes the caller's `out` accordingly.
template <typename Meta>
struct OutKernel final : public Meta {
  explicit OutKernel(const at::Tensor& out) : out_(out) {}

  void set_output_strided(
      int64_t index,
      c10::IntArrayRef sizes,
      c10::IntArrayRef strides,
      c10::TensorOptions options) override {
    set_output_raw_strided(index, sizes, strides, options);
  }

  void set_output_raw_strided(
      int64_t index,
      c10::IntArrayRef sizes,
      c10::IntArrayRef strides,
      c10::TensorOptions options) override {
    resize_out(sizes, strides, options);
    if constexpr (std::is_base_of_v<at::TensorIteratorBase, Meta>) {
      Meta::set_output_raw_strided(index, sizes, strides, options);
    }
  }

  const at::Tensor& maybe_get_output(int64_t /*index*/) override {
    return out_;
  }

 private:
  void resize_out(c10::IntArrayRef sizes, c10::IntArrayRef strides, const c10::TensorOptions& options) {
    TORCH_CHECK(
        options.dtype() == out_.dtype(),
        "Expected out tensor to have dtype ", options.dtype(), ", but got ", out_.dtype(), " instead");
    TORCH_CHECK(
        options.device() == out_.device(),
        "Expected out tensor to have device ", options.device(), ", but got ", out_.device(), " instead");
    // Strides from the meta function are advice, applied only to a tensor
    // that had to be resized anyway.
    if (at::native::resize_output(out_, sizes)) {
      if (!strides.empty()) {
        out_.as_strided_(sizes, strides);
      } else if (options.memory_format_opt().has_value()) {
        out_.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
      }
    }
  }

  const at::Tensor& out_;
};

// Unary float functions: meta, then the stub.
#define OPENREG_UNARY_OUT(NAME)                                              \
  at::Tensor& NAME##_out(const at::Tensor& self, at::Tensor& out) {          \
    HostCall call("aten::" #NAME ".out", {self, out});                       \
    const at::Tensor host_out = call.host(out);                              \
    OutKernel<at::meta::structured_##NAME> op(host_out);                     \
    op.meta(call.host(self));                                                \
    at::native::NAME##_stub(c10::DeviceType::PrivateUse1, op);               \
    call.finish();                                                           \
    return out;                                                              \
  }

OPENREG_UNARY_OUT(neg)
OPENREG_UNARY_OUT(exp)
OPENREG_UNARY_OUT(log)
OPENREG_UNARY_OUT(sqrt)
OPENREG_UNARY_OUT(sin)
OPENREG_UNARY_OUT(cos)
OPENREG_UNARY_OUT(tanh)
OPENREG_UNARY_OUT(sigmoid)
#undef OPENREG_UNARY_OUT

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  HostCall call("aten::add.out", {self, other, out});
  const at::Tensor host_out = call.host(out);
  OutKernel<at::meta::structured_add_Tensor> op(host_out);
  op.meta(call.host(self), call.host(other), alpha);
  at::native::add_stub(c10::DeviceType::PrivateUse1, op, alpha);
  call.finish();
  return out;
}

// sub is add with -alpha, after sub's own argument checks in its meta.
at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  HostCall call("aten::sub.out", {self, other, out});
  const at::Tensor host_out = call.host(out);
  OutKernel<at::meta::structured_sub_Tensor> op(host_out);
  op.meta(call.host(self), call.host(other), alpha);
  at::native::add_stub(c10::DeviceType::PrivateUse1, op, -alpha);
  call.finish();
  return out;
}

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  HostCall call("aten::mul.out", {self, other, out});
  const at::Tensor host_out = call.host(out);
  OutKernel<at::meta::structured_mul_Tensor> op(host_out);
  op.meta(call.host(self), call.host(other));
  at::native::mul_stub(c10::DeviceType::PrivateUse1, op);
  call.finish();
  return out;
}

at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  HostCall call("aten::div.out", {self, other, out});
  const at::Tensor host_out = call.host(out);
  OutKernel<at::meta::structured_div_Tensor> op(host_out);
  op.meta(call.host(self), call.host(other));
  at::native::div_true_stub(c10::DeviceType::PrivateUse1, op);
  call.finish();
  return out;
}

at::Tensor& eq_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  HostCall call("aten::eq.Tensor_out", {self, other, out});
  const at::Tensor host_out = call.host(out);
  OutKernel<at::meta::structured_eq_Tensor> op(host_out);
  op.meta(call.host(self), call.host(other));
  at::native::eq_stub(c10::DeviceType::PrivateUse1, op);
  call.finish();
  return out;
}

// The reduction's meta only sizes `out`; the reduction iterator is built as
// the CPU kernel builds it, so the summation order is the CPU's. Like the
// CPU, half and bfloat16 sums accumulate in float across every reduced
// dimension and round once at the end.
at::Tensor& sum_out(
    const at::Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    std::optional<c10::ScalarType> dtype,
    at::Tensor& out) {
  HostCall call("aten::sum.IntList_out", {self, out});
  const at::Tensor host_self = call.host(self);
  const at::Tensor host_out = call.host(out);
  OutKernel<at::meta::structured_sum_dim_IntList> op(host_out);
  op.meta(host_self, dim, keepdim, dtype);
  const bool reduced_precision = at::isReducedFloatingType(host_out.scalar_type());
  at::Tensor accumulator =
      reduced_precision ? at::empty(host_out.sizes(), host_out.options().dtype(at::kFloat)) : host_out;
  auto iter = at::meta::make_reduction_from_out_ty(
      host_self, accumulator, dim, keepdim, accumulator.scalar_type());
  if (iter.numel() == 0) {
    host_out.zero_();
  } else {
    at::native::sum_stub(c10::DeviceType::PrivateUse1, iter);
    if (reduced_precision) {
      host_out.copy_(accumulator);
    }
  }
  call.finish();
  return out;
}

// abs is not structured: its kernel follows the CPU's unary_op_impl_with_
// complex_to_float_out (complex input into a real output goes through a
// complex temporary).
at::Tensor& abs_out(const at::Tensor& self, at::Tensor& out) {
  HostCall call("aten::abs.out", {self, out});
  const at::Tensor host_self = call.host(self);
  at::Tensor host_out = call.host(out);
  if (self.is_complex() && !out.is_complex()) {
    const auto real_type = c10::toRealValueType(self.scalar_type());
    TORCH_CHECK(
        c10::canCast(real_type, out.scalar_type()),
        "result type ", real_type, " can't be cast to the desired output type ", out.scalar_type());
    at::Tensor complex_result = at::empty({0}, host_self.options());
    auto iter = at::TensorIterator::unary_op(complex_result, host_self);
    at::native::abs_stub(c10::DeviceType::PrivateUse1, iter);
    at::native::resize_output(host_out, complex_result.sizes());
    host_out.copy_(at::real(complex_result));
  } else {
    auto iter = at::TensorIterator::unary_op(host_out, host_self);
    at::native::abs_stub(c10::DeviceType::PrivateUse1, iter);
  }
  call.finish();
  return out;
}

// scaled_dot_product_attention asks the device's _fused_sdp_choice_stub
// which kernel to run, and uses the math composite when the device has no
// answer. Taking the CPU's answer keeps results identical to the CPU's: the
// chosen CPU kernel (flash attention for CPU) then runs on the fallback. With
// dropout the choice stays math, whose dropout draws from the openreg
// generator; the CPU kernel would draw from the CPU's.
int64_t fused_sdp_choice(
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask,
    double dropout_p,
    bool is_causal,
    std::optional<double> scale,
    bool enable_gqa) {
  if (dropout_p > 0.0) {
    return static_cast<int64_t>(at::SDPBackend::math);
  }
  return at::native::_fused_sdp_choice_stub(
      c10::DeviceType::CPU, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("abs.out", TORCH_FN(abs_out));
  m.impl("neg.out", TORCH_FN(neg_out));
  m.impl("exp.out", TORCH_FN(exp_out));
  m.impl("log.out", TORCH_FN(log_out));
  m.impl("sqrt.out", TORCH_FN(sqrt_out));
  m.impl("sin.out", TORCH_FN(sin_out));
  m.impl("cos.out", TORCH_FN(cos_out));
  m.impl("tanh.out", TORCH_FN(tanh_out));
  m.impl("sigmoid.out", TORCH_FN(sigmoid_out));
  m.impl("add.out", TORCH_FN(add_out));
  m.impl("sub.out", TORCH_FN(sub_out));
  m.impl("mul.out", TORCH_FN(mul_out));
  m.impl("div.out", TORCH_FN(div_out));
  m.impl("eq.Tensor_out", TORCH_FN(eq_out));
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
}

} // namespace at::openreg

namespace at::native {
using at::openreg::on_host;
REGISTER_PRIVATEUSE1_DISPATCH(abs_stub, (&on_host<abs_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(neg_stub, (&on_host<neg_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(exp_stub, (&on_host<exp_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(log_stub, (&on_host<log_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(sqrt_stub, (&on_host<sqrt_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(sin_stub, (&on_host<sin_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(cos_stub, (&on_host<cos_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(tanh_stub, (&on_host<tanh_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(sigmoid_stub, (&on_host<sigmoid_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(add_stub, (&on_host<add_stub, TensorIteratorBase, const c10::Scalar&>))
REGISTER_PRIVATEUSE1_DISPATCH(mul_stub, (&on_host<mul_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(div_true_stub, (&on_host<div_true_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(eq_stub, (&on_host<eq_stub, TensorIteratorBase>))
REGISTER_PRIVATEUSE1_DISPATCH(sum_stub, (&on_host<sum_stub, TensorIterator>))
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &at::openreg::fused_sdp_choice)
} // namespace at::native
