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
//   - direct: the iterator is built over the openreg tensors; when they need
//     no dtype conversion, its operands are pointed at the host view of the
//     same memory and labelled CPU operands (CPU scalars cast as the CPU
//     casts them), so impl() calls the CPU kernel of the stub on device
//     memory: no copy, no CPU tensor over device memory built;
//   - host: otherwise (openreg operands of mixed dtypes), the iterator is rebuilt
//     over host views (CPU tensors over device memory), for which it inserts
//     its casting temporaries as it does only for CPU tensors (CPU loops
//     never cast), and impl() runs exactly as on the CPU.
// openreg never calls a stub itself: DispatchStub's inline call path bakes in
// the CPU-capability macros libtorch was built with (AVX2/AVX512 on x86-64,
// SVE on aarch64), which an extension cannot know; libtorch's impl() calls it
// with its own.
#include <string>
#include <string_view>

#include <ATen/core/boxing/impl/boxing.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "aten/CudaContract.h"
#include "aten/FallbackPipeline.h"
#include "aten/HostAddresses.h"
#include "aten/StubOperators.h"

namespace at::openreg {
namespace {

// One call of operator `Op`, checking its devices as CUDA does. `out` is the
// out= tensor, `self` for in-place, undefined for functional.
template <typename Op, typename... Rest>
c10::MaybeOwned<at::Tensor> run(
    std::string_view name, const at::Tensor& out, const at::Tensor& self, const Rest&... rest) {
  const DeviceCall device_call(name, self, rest..., Written{out});
  HostAddresses addresses(device_call.device(), name);
  return run_stub<Op>(device_call, addresses, out, self, rest...);
}

// An overload whose dtypes CUDA's contract widens (complex32 sin,
// CudaContract.h): such calls take the boxed fallback, which computes them on
// the host in the wider dtype; the CPU loops the direct path runs have none.
class WidenedOverload {
 public:
  explicit WidenedOverload(std::string_view name) : op_(find(name)), rule_(cuda_contract_rule(op_)) {}

  bool widens(const at::Tensor& self) const {
    return widened_dtype(rule_, self.scalar_type()) != c10::ScalarType::Undefined;
  }

  template <typename... Args>
  at::Tensor run(const Args&... args) const {
    torch::jit::Stack stack = c10::impl::boxArgs<const Args&...>(args...);
    run_on_host(op_, &stack, c10::DispatchKey::PrivateUse1);
    return stack.back().toTensor();
  }

 private:
  static c10::OperatorHandle find(std::string_view name) {
    const size_t dot = name.find('.');
    return c10::Dispatcher::singleton().findSchemaOrThrow(
        std::string(name.substr(0, dot)).c_str(), dot == name.npos ? "" : name.data() + dot + 1);
  }

  c10::OperatorHandle op_;
  const CudaContractRule* rule_;
};

// The three registered overloads of a TensorIterator operator, their C++
// signatures taken from its meta function's.
template <typename Op, typename Meta = decltype(&Op::Native::meta)>
struct Overloads;

template <typename Op, typename MetaClass, typename... Rest>
struct Overloads<Op, void (MetaClass::*)(const at::Tensor&, Rest...)> {
  static at::Tensor functional(const at::Tensor& self, Rest... rest) {
    static const WidenedOverload widened(Op::functional);
    if (widened.widens(self)) {
      return widened.run(self, rest...);
    }
    return *run<Op>(Op::functional, at::Tensor(), self, rest...);
  }
  static at::Tensor& in_place(at::Tensor& self, Rest... rest) {
    static const WidenedOverload widened(Op::in_place);
    if (widened.widens(self)) {
      widened.run(self, rest...);
      return self;
    }
    run<Op>(Op::in_place, self, self, rest...);
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, Rest... rest, at::Tensor& out) {
    static const WidenedOverload widened(Op::out);
    if (widened.widens(self)) {
      widened.run(self, rest..., out);
      return out;
    }
    run<Op>(Op::out, out, self, rest...);
    return out;
  }
  static void register_to(torch::Library& m) {
    m.impl(Op::functional, TORCH_FN(functional));
    m.impl(Op::in_place, TORCH_FN(in_place));
    m.impl(Op::out, TORCH_FN(Overloads::out));
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  Overloads<neg_op>::register_to(m);
  Overloads<exp_op>::register_to(m);
  Overloads<log_op>::register_to(m);
  Overloads<sqrt_op>::register_to(m);
  Overloads<sin_op>::register_to(m);
  Overloads<cos_op>::register_to(m);
  Overloads<tanh_op>::register_to(m);
  Overloads<sigmoid_op>::register_to(m);
  Overloads<clamp_min_op>::register_to(m);
  Overloads<leaky_relu_op>::register_to(m);
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

}  // namespace at::openreg
