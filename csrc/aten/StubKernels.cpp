// DispatchStub operators: how a backend plugs into ATen's TensorIterator
// operators (unary float functions, binary arithmetic, a comparison) instead
// of the fallback, with the CPU's loops running on device memory.
//
// ATen implements these operators once: a structured meta function builds a
// TensorIterator, and the native impl() calls a per-device DispatchStub
// (exp_stub, add_stub, ...) for the iterator's device type. A stub is only
// reached from inside its operator, so the operator is registered for
// PrivateUse1 (functional, in-place and out=: PyTorch's default functional
// and in-place kernels would run the meta function twice and allocate through
// the dispatcher). Each registered kernel checks devices as CUDA does, runs
// the meta function and libtorch's impl() through StructuredKernel (what
// torchgen generates for in-tree backends), on one of two paths:
//   - direct: the iterator is built over the openreg tensors; when it needs
//     no dtype conversion, its operands are pointed at the host view of the
//     same memory and labelled CPU operands, so impl() calls the CPU kernel
//     of the stub on device memory: no copy, no CPU tensor built;
//   - host: otherwise (mixed dtypes, CPU scalars), the iterator is rebuilt
//     over host views (CPU tensors over device memory), for which it inserts
//     its casting temporaries as it does only for CPU tensors (CPU loops
//     never cast), and impl() runs exactly as on the CPU.
// openreg never calls a stub itself: DispatchStub's inline call path bakes in
// the CPU-capability macros libtorch was built with (AVX2/AVX512 on x86-64,
// SVE on aarch64), which an extension cannot know; libtorch's impl() calls it
// with its own.
#include <ATen/TensorIterator.h>
#include <ATen/ops/add_native.h>
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
#include <torch/library.h>

#include "aten/DeviceCall.h"
#include "aten/StructuredKernel.h"

namespace at::openreg {
namespace {

// One call of operator `Op`. `out` is the out= tensor, `self` for in-place,
// undefined for functional; returns the openreg result.
template <typename Op, typename... Rest>
c10::MaybeOwned<at::Tensor> run(std::string_view name, const at::Tensor& out, const at::Tensor& self, const Rest&... rest) {
  const DeviceCall device_call(name, self, rest..., Written{out});
  StructuredKernel<Op, /*HostOutput=*/false> direct(out);
  direct.meta(self, rest...);
  if (direct.needs_no_casts(Op::casts_outputs)) {
    // Nothing to compute or write: skip the kernel, whose CPU loop may still
    // read an empty broadcast operand as a scalar (mul of half tensors reads
    // operand 2 through a pointer that is not an element of any tensor).
    if (direct.numel() == 0 && direct.tensor_base(0).numel() == 0) {
      return direct.take_result();
    }
    HostAddresses addresses(device_call.device(), name);
    direct.point_operands_at_host(addresses);
    direct.impl(self, rest..., direct.output());
    return direct.take_result();
  }
  // The host path decides the output's size and layout itself, as the CPU
  // does: its iterator orders dimensions by the strides of the casting
  // temporaries it makes for promoted inputs (an expanded operand cast to the
  // common dtype becomes contiguous), which the direct attempt, over the
  // uncast inputs, could not see. That attempt left `out` untouched.
  HostCall host_call(device_call);
  StructuredKernel<Op, /*HostOutput=*/true> host(out, &host_call);
  const at::Tensor host_self = host_call.alias(self);
  host.meta(host_self, host_call.argument(rest)...);
  host.impl(host_self, host_call.argument(rest)..., host.output());
  host_call.write_back();
  return host.take_result();
}

// The three registered overloads of a TensorIterator operator, their C++
// signatures taken from its meta function's.
template <typename Op, typename Meta = decltype(&Op::Native::meta)>
struct Overloads;

template <typename Op, typename MetaClass, typename... Rest>
struct Overloads<Op, void (MetaClass::*)(const at::Tensor&, Rest...)> {
  static at::Tensor functional(const at::Tensor& self, Rest... rest) {
    return *run<Op>(Op::functional, at::Tensor(), self, rest...);
  }
  static at::Tensor& in_place(at::Tensor& self, Rest... rest) {
    run<Op>(Op::in_place, self, self, rest...);
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, Rest... rest, at::Tensor& out) {
    run<Op>(Op::out, out, self, rest...);
    return out;
  }
  static void register_to(torch::Library& m) {
    m.impl(Op::functional, TORCH_FN(functional));
    m.impl(Op::in_place, TORCH_FN(in_place));
    m.impl(Op::out, TORCH_FN(Overloads::out));
  }
};

// The operators: libtorch's native class, whether its iterator casts outputs
// (false for comparisons, whose bool output the loops write directly) and
// the three overload names.
#define OPENREG_STUB_OPERATOR(NAME, NATIVE, CASTS_OUTPUTS, FUNCTIONAL, IN_PLACE, OUT) \
  struct NAME##_op {                                                                 \
    using Native = at::native::NATIVE;                                               \
    static constexpr bool casts_outputs = CASTS_OUTPUTS;                             \
    static constexpr const char* functional = FUNCTIONAL;                            \
    static constexpr const char* in_place = IN_PLACE;                                \
    static constexpr const char* out = OUT;                                          \
  };
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
OPENREG_STUB_OPERATOR(lerp_scalar, structured_lerp_Scalar, true, "aten::lerp.Scalar", "aten::lerp_.Scalar",
                      "aten::lerp.Scalar_out")
OPENREG_STUB_OPERATOR(lerp_tensor, structured_lerp_Tensor, true, "aten::lerp.Tensor", "aten::lerp_.Tensor",
                      "aten::lerp.Tensor_out")
#undef OPENREG_UNARY_OPERATOR
#undef OPENREG_STUB_OPERATOR

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  Overloads<neg_op>::register_to(m);
  Overloads<exp_op>::register_to(m);
  Overloads<log_op>::register_to(m);
  Overloads<sqrt_op>::register_to(m);
  Overloads<sin_op>::register_to(m);
  Overloads<cos_op>::register_to(m);
  Overloads<tanh_op>::register_to(m);
  Overloads<sigmoid_op>::register_to(m);
  Overloads<add_op>::register_to(m);
  Overloads<sub_op>::register_to(m);
  Overloads<mul_op>::register_to(m);
  Overloads<div_op>::register_to(m);
  Overloads<eq_op>::register_to(m);
  Overloads<addcmul_op>::register_to(m);
  Overloads<addcdiv_op>::register_to(m);
  Overloads<lerp_scalar_op>::register_to(m);
  Overloads<lerp_tensor_op>::register_to(m);
}

} // namespace at::openreg
