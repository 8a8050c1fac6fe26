// The CPU fallback for sparse openreg tensors: every operator on the
// SparsePrivateUse1 (COO) and SparseCsrPrivateUse1 (CSR/CSC/BSR/BSC) keys
// without an openreg kernel runs its SparseCPU / SparseCsrCPU kernel through
// the same pipeline as dense tensors (FallbackPipeline.h), whose host views
// assemble a CPU sparse tensor from the host views of the device components
// (SparseCpuAliases.cpp). This file registers it.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "aten/FallbackPipeline.h"

namespace at::openreg {
namespace {

// `keys`: the call's; its highest is the sparse openreg key that brought it.
void sparse_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  run_on_host(op, stack, keys.highestPriorityTypeId());
}

}  // namespace

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

// Operators with a dedicated SparseCPU / SparseCsrCPU kernel for which the
// dispatcher would pick a composite over the backend fallback: a
// CompositeExplicitAutograd kernel (any sparse key), or the functional kernel
// PyTorch generates for a structured operator from its out= variant
// (CompositeExplicitAutogradNonFunctional, which the SparseCsr keys get but
// Sparse ones do not). Those composites are written for strided tensors
// (mm of a CSR tensor would build a CSR result and fail), so these operators
// are routed to the fallback explicitly, which runs the CPU's sparse kernel.
// tests/test_sparse.py checks that no other operator the CPU serves with a
// sparse kernel reaches a composite on openreg. Structural operators among
// them (copy_, clone, empty_like, ...) have kernels in SparseTensors.cpp;
// is_pinned and _pin_memory keep their composites, which treat every non-CPU
// tensor as unpinnable, as for CUDA.
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  for (const char* op :
       {"abs", "abs_", "deg2rad", "deg2rad_", "deg2rad.out", "isinf", "mv", "nan_to_num", "nan_to_num_", "permute",
        "rad2deg", "rad2deg_", "rad2deg.out", "sum", "unsqueeze"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
  }
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  // CompositeExplicitAutograd.
  for (const char* op :
       {"abs", "abs_", "_conj_physical", "conj_physical_", "deg2rad", "deg2rad_", "deg2rad.out", "isinf", "mul.Scalar",
        "mul_.Scalar", "rad2deg", "rad2deg_", "rad2deg.out", "select.int", "select_copy.int", "sum"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
  }
  // Functional variants of structured operators.
  for (const char* op :
       {"add.Tensor",
        "add_.Tensor",
        "addmm",
        "asin",
        "asin_",
        "asinh",
        "asinh_",
        "atan",
        "atan_",
        "atanh",
        "atanh_",
        "ceil",
        "ceil_",
        "erf",
        "erf_",
        "erfinv",
        "erfinv_",
        "expm1",
        "expm1_",
        "floor",
        "floor_",
        "frac",
        "frac_",
        "isneginf",
        "isposinf",
        "log1p",
        "log1p_",
        "mm",
        "mul.Tensor",
        "mul_.Tensor",
        "neg",
        "neg_",
        "round",
        "round_",
        "sgn",
        "sgn_",
        "sign",
        "sign_",
        "signbit",
        "sin",
        "sin_",
        "sinh",
        "sinh_",
        "sqrt",
        "sqrt_",
        "sum.dim_IntList",
        "tan",
        "tan_",
        "tanh",
        "tanh_",
        "threshold_backward",
        "trunc",
        "trunc_"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
  }
}

}  // namespace at::openreg
