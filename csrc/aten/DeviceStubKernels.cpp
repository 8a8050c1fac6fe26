// The DispatchStub way to provide an operator, as PyTorch's guide for new
// accelerators teaches it: ATen implements a TensorIterator operator once
// (abs_out, the structured clamp_min, leaky_relu, argmax and argmin kernels),
// building an iterator and calling a per-device stub (abs_stub,
// clamp_min_scalar_stub, leaky_relu_stub, argmax_stub, argmin_stub) for the
// iterator's device type; a backend fills the stub's
// PrivateUse1 slot with REGISTER_PRIVATEUSE1_DISPATCH and writes the kernel
// over TensorIteratorBase. These kernels are openreg's "device code": ATen's
// CPU loop helpers (cpu_kernel_vec, Loops.h), compiled into this extension,
// running on device memory once every openreg operand of the iterator points
// at the host view of its bytes. Each kernel computes what the CPU's kernel of
// the same stub computes, in the same precision, so results are bit for bit
// the CPU's (tests/test_stub_kernels.py).
//
// The operators themselves are registered for PrivateUse1 so that ATen's
// implementation is reached for openreg tensors: abs.out in Abs.cpp, argmax
// and argmin in ArgReductions.cpp, the elementwise structured ones through
// StubKernels.cpp's table (`device_stub` operators,
// StubOperators.h), whose impl() calls the stub with the iterator as built,
// over openreg tensors.

// Loops.h's loops, instantiated here at -O2, inline TensorIterator's
// SmallVector growth, where GCC 12 reports a maybe-uninitialized false
// positive (in libtorch's headers, but attributed to this file).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/native/Activation.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/ReduceOps.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/SharedReduceOps.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/native/cpu/Loops.h>
#include <ATen/native/cpu/Reduce.h>

#include "aten/HostAddresses.h"

namespace at::openreg {
namespace {

using at::vec::Vectorized;

// Runs `loop` on `iter` with its openreg operands pointed at host views of
// their memory, inside one scoped host access (and one launch on the
// device's current stream, KernelLaunch.h) named after the operator.
template <typename Loop>
void on_device_memory(at::TensorIteratorBase& iter, std::string_view op, const Loop& loop) {
  HostAddresses addresses(iter.device(), op);
  addresses.point_at_host(iter);
  loop();
}

// A unary operator. Complex inputs do not reach it: abs_out runs them on the
// CPU's own kernel (Abs.cpp), whose vectorized complex magnitude this build
// could not reproduce bit for bit.
void abs_kernel(at::TensorIteratorBase& iter) {
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, iter.dtype(), "abs_openreg", [&] {
    on_device_memory(iter, "aten::abs", [&] {
      at::native::cpu_kernel_vec(
          iter, [](scalar_t a) -> scalar_t { return static_cast<scalar_t>(std::abs(a)); },
          [](Vectorized<scalar_t> a) { return a.abs(); });
    });
  });
}

// A binary operator with a scalar operand: max(a, min), NaN inputs kept (a
// NaN `min` never gets here: clamp_min's impl fills the output with it).
void clamp_min_scalar_kernel(at::TensorIteratorBase& iter, c10::Scalar min_scalar) {
  AT_DISPATCH_ALL_TYPES_AND2(at::kBFloat16, at::kHalf, iter.common_dtype(), "clamp_min_scalar_openreg", [&] {
    const auto min = min_scalar.to<scalar_t>();
    const Vectorized<scalar_t> min_vec(min);
    on_device_memory(iter, "aten::clamp_min", [&] {
      at::native::cpu_kernel_vec(
          iter, [=](scalar_t a) -> scalar_t { return std::max(a, min); },
          [=](Vectorized<scalar_t> a) { return at::vec::clamp_min(a, min_vec); });
    });
  });
}

// An activation: a for a > 0, else a * negative_slope, computed in the
// operator's math type (float for half and bfloat16), as the CPU computes it.
void leaky_relu_kernel(at::TensorIteratorBase& iter, const c10::Scalar& negative_slope) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, iter.dtype(), "leaky_relu_openreg", [&] {
    using math_t = at::opmath_type<scalar_t>;
    const auto slope = negative_slope.to<math_t>();
    on_device_memory(iter, "aten::leaky_relu", [&] {
      if constexpr (std::is_same_v<math_t, scalar_t>) {
        // (The casts only satisfy the half and bfloat16 instances of this
        // branch, which never run.)
        const auto s = static_cast<scalar_t>(slope);
        const Vectorized<scalar_t> zero(scalar_t(0));
        const Vectorized<scalar_t> slope_vec(s);
        at::native::cpu_kernel_vec(
            iter, [=](scalar_t a) -> scalar_t { return a > scalar_t(0) ? a : static_cast<scalar_t>(a * s); },
            [=](Vectorized<scalar_t> a) { return Vectorized<scalar_t>::blendv(a * slope_vec, a, a > zero); });
      } else {
        at::native::cpu_kernel(iter, [=](scalar_t a) -> scalar_t {
          const math_t x = static_cast<math_t>(a);
          return static_cast<scalar_t>(x > math_t(0) ? x : x * slope);
        });
      }
    });
  });
}

// Reductions: the index of the largest (smallest) element along the reduced
// dimensions, the first one on ties, a NaN counting as the extreme (ATen's
// ArgMaxOps / ArgMinOps, as on the CPU). The loop is ATen's
// binary_kernel_reduce, whose partial results across threads stay in host
// memory. (Its vectorized sibling binary_kernel_reduce_vec keeps a full
// reduction's partials in a buffer allocated on the output's device and
// written through raw pointers, which a device without host-addressable
// memory cannot take: reductions through it need a loop of the device's own.)
template <template <typename> class Ops, bool largest>
void index_reduction_kernel(at::TensorIterator& iter, std::string_view op) {
  AT_DISPATCH_ALL_TYPES_AND2(
      at::kHalf, at::kBFloat16, iter.dtype(1), largest ? "argmax_openreg" : "argmin_openreg", [&] {
        const scalar_t init = largest ? at::native::lower_bound<scalar_t>() : at::native::upper_bound<scalar_t>();
        on_device_memory(iter, op, [&] {
          at::native::binary_kernel_reduce(iter, Ops<scalar_t>{}, std::pair<scalar_t, int64_t>(init, 0));
        });
      });
}

void argmax_kernel(at::TensorIterator& iter) {
  index_reduction_kernel<at::native::ArgMaxOps, true>(iter, "aten::argmax");
}

void argmin_kernel(at::TensorIterator& iter) {
  index_reduction_kernel<at::native::ArgMinOps, false>(iter, "aten::argmin");
}

}  // namespace
}  // namespace at::openreg

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(abs_stub, &at::openreg::abs_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(clamp_min_scalar_stub, &at::openreg::clamp_min_scalar_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(leaky_relu_stub, &at::openreg::leaky_relu_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(argmax_stub, &at::openreg::argmax_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(argmin_stub, &at::openreg::argmin_kernel)
}  // namespace at::native
