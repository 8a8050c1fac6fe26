// TensorIterator operators whose PrivateUse1 kernel would be PyTorch's
// generated structured default run the CPU's own generated kernel instead, on
// host views (the fallback), so that their results are laid out as on the CPU.
//
// For a structured operator (`structured_delegate` in native_functions.yaml:
// `bitwise_xor`, `fmod`, `atan2`, `signbit`, ...), torchgen gives every
// backend without a kernel of its own a CompositeExplicitAutogradNonFunctional
// default for the functional and in-place overloads: it runs the meta
// function over the caller's tensors, allocates the result as the meta
// function says, then calls the `.out` overload (on openreg: the CPU's `.out`
// kernel through the fallback). For pointwise operators the meta function
// builds a TensorIterator, and a TensorIterator lays its output out
// differently by device: over CPU tensors it first replaces each input that
// needs a dtype conversion with a converted copy (`.to(common_dtype)`, which
// makes an expanded or gapped input contiguous) and orders the output's
// dimensions by those copies; over any other device it converts inside the
// kernel and orders by the inputs as given. A type-promoting call with an
// expanded, strided or permuted operand would get other strides than on the
// CPU (`torch.tensor([2]).expand(17, 3) ^ x.t()`), and a following reduction
// could round differently. Through the fallback the meta function sees host
// views, which are CPU tensors, so the CPU's rule applies as is. The CPU
// kernel allocates the result, and the iterator's converted copies, in
// device memory (CpuAllocationsOnDevice.h), so the result reaches the device
// without a copy.
//
// The operators are found in the dispatcher, so that a PyTorch update adding
// one is covered: aten operators with a CPU kernel, the generated default and
// no openreg kernel, tagged `pointwise` or listed below. Only the functional
// overloads: an in-place or out= call writes into a tensor the caller laid
// out, and the default leaves its layout alone.
#include "aten/StructuredDefaults.h"

#include <string_view>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "aten/FallbackPipeline.h"
#include "aten/CpuAllocationsOnDevice.h"

namespace at::openreg {
namespace {

// Functional operators whose meta function builds a TensorIterator but which
// carry no `pointwise` tag (tests/test_composite_routing.py checks this list
// against native_functions.yaml's TensorIterator operators).
constexpr std::string_view untagged_iterator_operators[] = {
    "aten::elu_backward",        "aten::glu",
    "aten::hardshrink_backward", "aten::hardsigmoid_backward",
    "aten::leaky_relu_backward", "aten::smooth_l1_loss",
    "aten::softplus_backward",   "aten::softshrink_backward",
};

bool builds_iterator(const c10::OperatorHandle& op) {
  if (op.hasTag(at::Tag::pointwise)) {
    return true;
  }
  const std::string name = c10::toString(op.operator_name());
  for (std::string_view listed : untagged_iterator_operators) {
    if (name == listed) {
      return true;
    }
  }
  return false;
}

bool runs_structured_default(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
      op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) &&
      !op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
}

void run_iterator_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_host(op, stack, c10::DispatchKey::PrivateUse1, KernelAllocations::OnDevice);
}

}  // namespace

void route_structured_iterator_defaults() {
  replace_cpu_allocator();
  static torch::Library library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) {
      continue;
    }
    const std::optional<c10::OperatorHandle> op = dispatcher.findOp(name);
    if (op && !op->schema().is_mutable() && runs_structured_default(*op) && builds_iterator(*op)) {
      library.impl(c10::toString(name).c_str(), torch::CppFunction::makeFromBoxedFunction<&run_iterator_on_host>());
    }
  }
}

}  // namespace at::openreg
