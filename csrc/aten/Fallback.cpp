// The CPU fallback: every operator without an openreg kernel runs its CPU
// kernel directly on device memory (FallbackPipeline.h, CpuAliases.h), after the
// same device checks CUDA makes, so a tensor left on the CPU is still an
// error. This file registers it: for every operator (the backend fallback),
// for the operators whose PrivateUse1 default is not the CPU's kernel, and the
// operators that must not run on the host at all.
//
// Controls (runtime/Options.h parses them):
//   OPENREG_FALLBACK_MODE=copy  PyTorch's own at::native::cpu_fallback, which
//                               copies every argument to the CPU and back
//                               (to measure what zero-copy saves);
//   OPENREG_FALLBACK=0          strict: an operator without an openreg kernel
//                               raises NotImplementedError naming it;
//   OPENREG_FALLBACK_WARN=1     warn once per operator that falls back;
//   OPENREG_FALLBACK_OPS=a,b    send these operators to the fallback even
//                               where an openreg kernel exists (debugging,
//                               ForcedFallbacks.cpp).
// Every call is counted per operator (torch.openreg.fallback_stats()).
#include "aten/Fallback.h"

#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "aten/FallbackPipeline.h"
#include "aten/OperatorPolicy.h"

namespace at::openreg {
namespace {

// Operators that must not run on the host even though a CPU (or composite)
// kernel exists. Each is registered explicitly below, since a composite kernel
// would otherwise be chosen before the fallback; the error names the operator
// and the device.
const std::unordered_map<std::string, std::string>& blocklist() {
  static const std::unordered_map<std::string, std::string> ops = {
      {"_pin_memory", "pinning is for CPU tensors; an openreg tensor already lives in device memory"},
  };
  return ops;
}

void blocked_operator(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  const std::string& name = op.schema().operator_name().name;
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "The operator '", policy_for(op).name,
      "' is not supported on the openreg device: ", blocklist().at(name.substr(name.find("::") + 2)));
}

}  // namespace

void host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_host(op, stack, c10::DispatchKey::PrivateUse1);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
}

const std::vector<std::string>& operators_routed_to_the_host() {
  // Operators whose default PrivateUse1 kernel is not the CPU's: the host runs
  // the CPU kernel instead, so that results (and argument checks) match it.
  //  - where the CPU has a kernel of its own but PyTorch gives PrivateUse1 a
  //    composite (a generic math version: other rounding, other output
  //    strides, other statistics dtypes, fewer checks). The whole class, and
  //    the composites deliberately kept, are listed by
  //    `python -m torch_openreg.testing.composite_routing`; a test fails when
  //    PyTorch adds one;
  //  - mse_loss: the structured "NonFunctional" default calls mse_loss.out
  //    with a 0-dim output, which the CPU kernel resizes with a deprecation
  //    warning on every call;
  //  - conj_physical_, _conj_physical: composites that call conj_physical_stub
  //    on an iterator over the device tensors;
  //  - mode.values: a composite that accepts only CPU, CUDA and XPU tensors;
  //  - index.Tensor: the structured "NonFunctional" default runs the meta
  //    function, then index.Tensor_out, whose CPU kernel runs it again, so the
  //    meta's warnings (indexing with a uint8 mask is deprecated) fired twice.
  static const std::vector<std::string> names = {
      "_stack",
      "_stack.out",
      "addr",
      "addr_",
      "addr.out",
      "all.dims_out",
      "any.dims_out",
      "linalg__powsum",
      "mish_backward",
      "native_channel_shuffle",
      "native_group_norm",
      "native_layer_norm",
      "pixel_shuffle",
      "pixel_unshuffle",
      "silu_backward",
      "mse_loss",
      "conj_physical_",
      "_conj_physical",
      "mode.values",
      "index.Tensor"};
  return names;
}

// The per-operator form of the same fallback: what a vendor writes to route a
// chosen operator to the host explicitly, visible in the dispatch table as a
// PrivateUse1 kernel rather than as the backend fallback.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("remainder.Tensor", torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
  for (const std::string& name : operators_routed_to_the_host()) {
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
  }
  for (const auto& [name, reason] : blocklist()) {
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&blocked_operator>());
  }
}

}  // namespace at::openreg
