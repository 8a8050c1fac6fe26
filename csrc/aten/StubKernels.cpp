// DispatchStub kernels: how a backend plugs into ATen's TensorIterator
// operators (unary float functions, binary arithmetic, a comparison, a
// reduction) instead of the fallback.
//
// Two registrations are needed per operator, because a stub is only reached
// from inside the operator that calls it:
//   1. the operator itself (functional, in-place and `.out` overloads),
//      registered for PrivateUse1. It checks devices as CUDA does, runs the
//      structured meta function (completed into a kernel the way PyTorch's
//      generated code completes it for its own backends), then calls the stub
//      for PrivateUse1. The CPU loops behind the stub read and write memory
//      directly and do not cast, so the iterator must hand them host
//      addresses of operands already in the common dtype:
//        - direct path: the iterator is built over the openreg tensors; when
//          it needs no dtype conversion, its operands are pointed at the host
//          view of the same memory (HostAddresses) and the stub runs;
//        - host path: otherwise (mixed dtypes, CPU scalars), the iterator is
//          rebuilt over host views (HostViews), CPU tensors for which it
//          inserts its casting temporaries, as it does only for CPU tensors.
//      Registering the functional and in-place overloads too, rather than
//      letting PyTorch's default PrivateUse1 kernels reach `.out` (which run
//      the meta function twice and allocate through the dispatcher), keeps a
//      small operator's cost close to the CPU's.
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

#include <type_traits>

#include <ATen/EmptyTensor.h>
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
#include <c10/util/MaybeOwned.h>
#include <torch/library.h>

#include "aten/DeviceCheck.h"
#include "aten/HostView.h"
#include "runtime/OpenRegDeviceAllocator.h"

namespace at::openreg {
namespace {

// The PrivateUse1 kernel of a stub: the CPU kernel of the same stub. Every
// openreg operand of its iterator must point at host memory (see above); one
// still pointing at device memory is refused rather than faulting.
template <auto& Stub, typename Iterator, typename... Args>
void on_host(Iterator& iter, Args... args) {
  for (int i = 0; i < iter.ntensors(); ++i) {
    const at::TensorBase& operand = iter.tensor_base(i);
    TORCH_CHECK_NOT_IMPLEMENTED(
        !operand.is_privateuseone() || operand.storage().data() == nullptr ||
            iter.data_ptr(i) != operand.data_ptr(),
        "openreg stub kernels run on TensorIterators whose operands point at host memory "
        "(see csrc/aten/StubKernels.cpp); operand ", i, " points at device memory");
  }
  Stub(c10::DeviceType::CPU, iter, args...);
}

// The device check (over every tensor argument; `out`, the out= tensor or the
// self of an in-place call, as written) and the device guard.
class DeviceCall {
 public:
  template <typename... Args>
  DeviceCall(std::string_view op, const at::Tensor& out, const Args&... args)
      : device_(common_device(op, args..., Written{out})), guard_(device_) {}

  c10::Device device() const {
    return device_;
  }

 private:
  c10::Device device_;
  c10::DeviceGuard guard_;
};

// Host views of the openreg arguments, for the host path; finish() carries a
// resize of an out= argument back.
class HostCall {
 public:
  HostCall(c10::Device device, std::string_view op) : views_(device, op) {}

  at::Tensor host(const at::Tensor& t) {
    return t.defined() && t.is_privateuseone() ? views_.alias(t) : t;
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

  void finish() {
    views_.write_back();
  }

 private:
  HostViews views_;
};

// What the meta function asked for an output, applied to an existing tensor
// (out=, in-place): a dtype check and resize_output. Strides from the meta
// function are advice, applied only to a tensor that had to be resized anyway.
void resize_out(
    const at::Tensor& out,
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    const c10::TensorOptions& options) {
  TORCH_CHECK(
      options.dtype() == out.dtype(),
      "Expected out tensor to have dtype ", options.dtype(), ", but got ", out.dtype(), " instead");
  if (at::native::resize_output(out, sizes)) {
    if (!strides.empty()) {
      out.as_strided_(sizes, strides);
    } else if (options.memory_format_opt().has_value()) {
      out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
    }
  }
}

// True if the CPU loops can run on this iterator's operands as they are: all
// openreg tensors, in the common dtype (outputs too, for operators whose
// iterator casts its outputs). A CPU scalar operand goes to the host path,
// where the iterator casts it as the CPU does. An output not set yet (while
// the iterator is being built) does not count.
bool needs_no_casts(const at::TensorIteratorBase& iter, bool casts_outputs) {
  const std::optional<c10::ScalarType> common = iter.maybe_common_dtype();
  if (!common) {
    return false;
  }
  for (int i = 0; i < iter.ntensors(); ++i) {
    const bool output = i < iter.noutputs();
    if (output && !iter.tensor_base(i).defined()) {
      continue;
    }
    if (!iter.tensor_base(i).is_privateuseone()) {
      return false;
    }
    if ((!output || casts_outputs) && iter.dtype(i) != *common) {
      return false;
    }
  }
  return true;
}

// A structured operator's meta class completed into a kernel, as PyTorch's
// generated code completes it for its in-tree backends: the meta function
// reports the output's size, strides and dtype through set_output_*, and this
// either allocates the output (functional call) or checks and resizes the
// caller's tensor (out=, and in-place, where it is `self`).
//
// `HostOutput` false: the direct path, over the openreg tensors; a fresh
// output is openreg memory. true: the host path, where the meta function sees
// host views only, the output included; a fresh output is openreg memory seen
// through a host view. `Op` names the meta class (Op::Meta) and whether its
// iterator casts outputs (Op::casts_outputs).
template <typename Op, bool HostOutput>
struct Kernel final : public Op::Meta {
  using Meta = typename Op::Meta;

  // `out`: the out= tensor, `self` for an in-place call, undefined for a
  // functional call (it is borrowed: see HostView.h for why no reference is
  // taken). `call`: the host views, for the host path.
  explicit Kernel(const at::Tensor& out, HostCall* call = nullptr)
      : call_(call), device_out_(c10::MaybeOwned<at::Tensor>::borrowed(out)) {
    if constexpr (HostOutput) {
      host_out_ = call->host(out);
    }
  }

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
    if constexpr (!HostOutput && std::is_base_of_v<at::TensorIteratorBase, Meta>) {
      if (!needs_no_casts(*this, Op::casts_outputs)) {
        // The host path will make this call again and lay the output out as
        // the CPU does (see call()): leave the caller's tensor alone, and
        // give the iterator an empty placeholder rather than an allocation.
        if (!device_out_->defined()) {
          device_out_ = c10::MaybeOwned<at::Tensor>::owned(at::detail::empty_generic(
              {0}, c10::openreg::getDeviceAllocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
              options.dtype().toScalarType(), std::nullopt));
        }
        Meta::set_output_raw_strided(index, sizes, strides, options);
        return;
      }
    }
    if (device_out_->defined()) {
      resize_out(output(), sizes, strides, options);
    } else {
      allocate_out(sizes, strides, options);
    }
    if constexpr (std::is_base_of_v<at::TensorIteratorBase, Meta>) {
      Meta::set_output_raw_strided(index, sizes, strides, options);
    }
  }

  const at::Tensor& maybe_get_output(int64_t /*index*/) override {
    return output();
  }

  // The output as the meta function sees it.
  const at::Tensor& output() const {
    return HostOutput ? host_out_ : *device_out_;
  }

  // The openreg result: the caller's tensor, borrowed, for out= and in-place
  // calls; the fresh output for functional calls.
  c10::MaybeOwned<at::Tensor> take_result() {
    return std::move(device_out_);
  }

 private:
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
      host_out_ = call_->host(*device_out_);
    }
  }

  HostCall* call_;
  c10::MaybeOwned<at::Tensor> device_out_;
  at::Tensor host_out_;  // the host path's view of the output
};

// One call of operator `Op` (see the top of the file): the direct path, or
// the host path when the iterator would need casts. `out` is the out= tensor,
// `self` for in-place, undefined for functional; returns the openreg result.
// Op provides meta(kernel, arguments...) and stub(iterator, arguments...).
template <typename Op, typename... Args>
c10::MaybeOwned<at::Tensor> call(std::string_view name, const at::Tensor& out, const Args&... args) {
  DeviceCall device_call(name, out, args...);
  Kernel<Op, /*HostOutput=*/false> direct(out);
  Op::meta(direct, args...);
  if (needs_no_casts(direct, Op::casts_outputs)) {
    // Nothing to compute or write: skip the stub, whose CPU kernel may still
    // read an empty broadcast operand as a scalar (mul of half tensors reads
    // operand 2 through a pointer that is not an element of any tensor).
    if (direct.numel() == 0 && direct.tensor_base(0).numel() == 0) {
      return direct.take_result();
    }
    HostAddresses addresses(device_call.device(), name);
    for (int i = 0; i < direct.ntensors(); ++i) {
      direct.unsafe_replace_operand(i, addresses.address(direct.tensor_base(i)));
    }
    Op::stub(direct, args...);
    return direct.take_result();
  }
  // The host path decides the output's size and layout itself, as the CPU
  // does: its iterator orders dimensions by the strides of the casting
  // temporaries it makes for promoted inputs (an expanded operand cast to the
  // common dtype becomes contiguous), which the direct attempt, over the
  // uncast inputs, could not see. That attempt left `out` untouched.
  HostCall host_call(device_call.device(), name);
  Kernel<Op, /*HostOutput=*/true> host(out, &host_call);
  Op::meta(host, host_call.argument(args)...);
  Op::stub(host, args...);
  host_call.finish();
  return host.take_result();
}

// The three registered entry points of a TensorIterator operator.
template <typename Op, typename... Args>
at::Tensor functional(Args... args) {
  return *call<Op>(Op::functional_name, at::Tensor(), args...);
}

template <typename Op, typename... Args>
at::Tensor& in_place(at::Tensor& self, Args... args) {
  call<Op>(Op::in_place_name, self, self, args...);
  return self;
}

template <typename Op, typename... Args>
at::Tensor& out(Args... args, at::Tensor& out) {
  call<Op>(Op::out_name, out, args...);
  return out;
}

// The operators: each names its overloads, runs its meta function on the
// (openreg or host) tensors it is given, and calls its stub.
#define OPENREG_UNARY_OP(NAME)                                          \
  struct NAME##_op {                                                    \
    using Meta = at::meta::structured_##NAME;                           \
    static constexpr bool casts_outputs = true;                         \
    static constexpr const char* functional_name = "aten::" #NAME;      \
    static constexpr const char* in_place_name = "aten::" #NAME "_";    \
    static constexpr const char* out_name = "aten::" #NAME ".out";      \
    template <typename K>                                               \
    static void meta(K& op, const at::Tensor& self) {                   \
      op.meta(self);                                                    \
    }                                                                   \
    static void stub(at::TensorIteratorBase& iter, const at::Tensor&) { \
      at::native::NAME##_stub(c10::DeviceType::PrivateUse1, iter);      \
    }                                                                   \
  };

OPENREG_UNARY_OP(neg)
OPENREG_UNARY_OP(exp)
OPENREG_UNARY_OP(log)
OPENREG_UNARY_OP(sqrt)
OPENREG_UNARY_OP(sin)
OPENREG_UNARY_OP(cos)
OPENREG_UNARY_OP(tanh)
OPENREG_UNARY_OP(sigmoid)
#undef OPENREG_UNARY_OP

struct add_op {
  using Meta = at::meta::structured_add_Tensor;
  static constexpr bool casts_outputs = true;
  static constexpr const char* functional_name = "aten::add.Tensor";
  static constexpr const char* in_place_name = "aten::add_.Tensor";
  static constexpr const char* out_name = "aten::add.out";
  template <typename K>
  static void meta(K& op, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
    op.meta(self, other, alpha);
  }
  static void stub(at::TensorIteratorBase& iter, const at::Tensor&, const at::Tensor&, const at::Scalar& alpha) {
    at::native::add_stub(c10::DeviceType::PrivateUse1, iter, alpha);
  }
};

// sub is add with -alpha, after sub's own argument checks in its meta.
struct sub_op {
  using Meta = at::meta::structured_sub_Tensor;
  static constexpr bool casts_outputs = true;
  static constexpr const char* functional_name = "aten::sub.Tensor";
  static constexpr const char* in_place_name = "aten::sub_.Tensor";
  static constexpr const char* out_name = "aten::sub.out";
  template <typename K>
  static void meta(K& op, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
    op.meta(self, other, alpha);
  }
  static void stub(at::TensorIteratorBase& iter, const at::Tensor&, const at::Tensor&, const at::Scalar& alpha) {
    at::native::add_stub(c10::DeviceType::PrivateUse1, iter, -alpha);
  }
};

// CASTS_OUTPUTS: false for comparisons, whose bool output the loops write
// directly whatever the common dtype.
#define OPENREG_BINARY_OP(NAME, META, STUB, CASTS_OUTPUTS, FUNCTIONAL, IN_PLACE, OUT)          \
  struct NAME##_op {                                                                           \
    using Meta = at::meta::META;                                                               \
    static constexpr bool casts_outputs = CASTS_OUTPUTS;                                       \
    static constexpr const char* functional_name = FUNCTIONAL;                                 \
    static constexpr const char* in_place_name = IN_PLACE;                                     \
    static constexpr const char* out_name = OUT;                                               \
    template <typename K>                                                                      \
    static void meta(K& op, const at::Tensor& self, const at::Tensor& other) {                 \
      op.meta(self, other);                                                                    \
    }                                                                                          \
    static void stub(at::TensorIteratorBase& iter, const at::Tensor&, const at::Tensor&) {    \
      at::native::STUB(c10::DeviceType::PrivateUse1, iter);                                    \
    }                                                                                          \
  };

OPENREG_BINARY_OP(mul, structured_mul_Tensor, mul_stub, true, "aten::mul.Tensor", "aten::mul_.Tensor", "aten::mul.out")
OPENREG_BINARY_OP(div, structured_div_Tensor, div_true_stub, true, "aten::div.Tensor", "aten::div_.Tensor", "aten::div.out")
OPENREG_BINARY_OP(eq, structured_eq_Tensor, eq_stub, false, "aten::eq.Tensor", "aten::eq_.Tensor", "aten::eq.Tensor_out")
#undef OPENREG_BINARY_OP

// sum runs on the host path only: the reduction's meta only sizes the output,
// and the reduction iterator is built as the CPU kernel builds it, over host
// views, so the summation order is the CPU's. Like the CPU, half and bfloat16
// sums accumulate in float across every reduced dimension and round once at
// the end.
struct sum_op {
  using Meta = at::meta::structured_sum_dim_IntList;
};

c10::MaybeOwned<at::Tensor> sum_call(
    std::string_view name,
    const at::Tensor& out,
    const at::Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    std::optional<c10::ScalarType> dtype) {
  DeviceCall device_call(name, out, self);
  HostCall host_call(device_call.device(), name);
  Kernel<sum_op, /*HostOutput=*/true> op(out, &host_call);
  const at::Tensor host_self = host_call.host(self);
  op.meta(host_self, dim, keepdim, dtype);
  const at::Tensor& host_out = op.output();
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
  host_call.finish();
  return op.take_result();
}

at::Tensor sum(
    const at::Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    std::optional<c10::ScalarType> dtype) {
  return *sum_call("aten::sum.dim_IntList", at::Tensor(), self, dim, keepdim, dtype);
}

at::Tensor& sum_out(
    const at::Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    std::optional<c10::ScalarType> dtype,
    at::Tensor& out) {
  sum_call("aten::sum.IntList_out", out, self, dim, keepdim, dtype);
  return out;
}

// abs is not structured: its kernel follows the CPU's unary_op_impl_with_
// complex_to_float_out (complex input into a real output goes through a
// complex temporary).
at::Tensor& abs_out(const at::Tensor& self, at::Tensor& out) {
  const DeviceCall device_call("aten::abs.out", out, self);
  HostCall call(device_call.device(), "aten::abs.out");
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
  // The argument types exactly as in the operators' C++ signatures.
  using Tensor = const at::Tensor&;
  using Scalar = const c10::Scalar&;
  m.impl("abs.out", TORCH_FN(abs_out));
#define OPENREG_REGISTER_UNARY(NAME)                               \
  m.impl(#NAME, TORCH_FN((functional<NAME##_op, Tensor>)));        \
  m.impl(#NAME "_", TORCH_FN((in_place<NAME##_op>)));              \
  m.impl(#NAME ".out", TORCH_FN((out<NAME##_op, Tensor>)));
  OPENREG_REGISTER_UNARY(neg)
  OPENREG_REGISTER_UNARY(exp)
  OPENREG_REGISTER_UNARY(log)
  OPENREG_REGISTER_UNARY(sqrt)
  OPENREG_REGISTER_UNARY(sin)
  OPENREG_REGISTER_UNARY(cos)
  OPENREG_REGISTER_UNARY(tanh)
  OPENREG_REGISTER_UNARY(sigmoid)
#undef OPENREG_REGISTER_UNARY
  m.impl("add.Tensor", TORCH_FN((functional<add_op, Tensor, Tensor, Scalar>)));
  m.impl("add_.Tensor", TORCH_FN((in_place<add_op, Tensor, Scalar>)));
  m.impl("add.out", TORCH_FN((out<add_op, Tensor, Tensor, Scalar>)));
  m.impl("sub.Tensor", TORCH_FN((functional<sub_op, Tensor, Tensor, Scalar>)));
  m.impl("sub_.Tensor", TORCH_FN((in_place<sub_op, Tensor, Scalar>)));
  m.impl("sub.out", TORCH_FN((out<sub_op, Tensor, Tensor, Scalar>)));
  m.impl("mul.Tensor", TORCH_FN((functional<mul_op, Tensor, Tensor>)));
  m.impl("mul_.Tensor", TORCH_FN((in_place<mul_op, Tensor>)));
  m.impl("mul.out", TORCH_FN((out<mul_op, Tensor, Tensor>)));
  m.impl("div.Tensor", TORCH_FN((functional<div_op, Tensor, Tensor>)));
  m.impl("div_.Tensor", TORCH_FN((in_place<div_op, Tensor>)));
  m.impl("div.out", TORCH_FN((out<div_op, Tensor, Tensor>)));
  m.impl("eq.Tensor", TORCH_FN((functional<eq_op, Tensor, Tensor>)));
  m.impl("eq_.Tensor", TORCH_FN((in_place<eq_op, Tensor>)));
  m.impl("eq.Tensor_out", TORCH_FN((out<eq_op, Tensor, Tensor>)));
  m.impl("sum.dim_IntList", TORCH_FN(sum));
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
