#pragma once

#include <string>
#include <vector>

#include <ATen/core/stack.h>

namespace c10 {
class OperatorHandle;
}  // namespace c10

namespace at::openreg {

// The CPU fallback for dense openreg tensors (FallbackPipeline.h), in the form
// registered for PrivateUse1: also what a kernel calls to hand one call to the
// host (Median.cpp).
void host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The aten operators registered by name to host_fallback because their
// PrivateUse1 default is not the CPU's kernel (Fallback.cpp says why, per
// operator): torch_openreg._C._operators_routed_to_the_host().
const std::vector<std::string>& operators_routed_to_the_host();

// OPENREG_FALLBACK_OPS=op1,op2 routes the named operators to the fallback even
// where an openreg kernel exists (ForcedFallbacks.cpp). Called at lazy init.
// Throws, naming the variable, if a name is not an aten operator.
void register_forced_fallbacks();

}  // namespace at::openreg
