// Strided nested tensors on openreg (NestedTensorPrivateUse1).
//
// PyTorch registers most nested-tensor kernels for NestedTensorCPU and
// NestedTensorCUDA only, so an openreg nested tensor finds no kernel. Every
// such operator runs its NestedTensorCPU kernel through the zero-copy
// fallback (CpuAliases maps nested tensors, see NestedCpuAliases.cpp): results
// and argument checks are the CPU's.
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <torch/library.h>

#include "aten/CpuAliases.h"
#include "aten/FallbackPipeline.h"

namespace at::openreg {
namespace {

void nested_host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_host(op, stack, c10::DispatchKey::NestedTensorPrivateUse1);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_host_fallback>());
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  // Operators with a NestedTensorCPU kernel whose NestedTensorPrivateUse1
  // entry would otherwise be a CompositeImplicitAutograd kernel, chosen before
  // any backend fallback; those composites assume strided sizes and fail on a
  // nested tensor ("NestedTensorImpl doesn't support sizes"). Found by
  // comparing the two dispatch table rows of every operator.
  for (const char* name :
       {"linear", "matmul", "matmul.out", "chunk", "narrow", "silu_backward", "value_selecting_reduction_backward"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&nested_host_fallback>());
  }
  // Operators that may cross devices use PyTorch's device-generic nested
  // kernels, which copy the buffer with the dense copy: the fallback would
  // refuse a CPU argument as a device mismatch, and would put a result asked
  // for on the CPU on the device.
  m.impl("_to_copy", TORCH_FN(at::native::_to_copy_nested));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_nested));
  m.impl("copy_", TORCH_FN(at::native::copy_nested_));
}

}  // namespace at::openreg
