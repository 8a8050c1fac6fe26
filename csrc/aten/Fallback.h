#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/stack.h>
#include <c10/core/DispatchKey.h>

namespace c10 {
class OperatorHandle;
} // namespace c10

namespace at::openreg {

// The zero-copy fallback for one call: checks devices as CUDA does, runs the
// operator's kernel for `host_key` (CPU, or NestedTensorCPU for nested
// tensors) on host views of the openreg arguments, carries back what it did to
// them and maps its results to the device. `host_fallback` is the form
// registered for PrivateUse1 (host_key CPU).
void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey host_key);
void host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// For other fallbacks (SparseFallback.cpp): applies OPENREG_FALLBACK=0 and
// OPENREG_FALLBACK_WARN to a call of `op` and counts it in fallback_stats().
void count_fallback_call(const c10::OperatorHandle& op);

// Calls that ran on the CPU fallback, per operator, since the last reset
// (operators with at least one call, sorted by name).
std::vector<std::pair<std::string, uint64_t>> fallback_stats();
void reset_fallback_stats();

// OPENREG_FALLBACK_OPS=op1,op2 routes the named operators to the fallback even
// where an openreg kernel exists. Called at lazy init (first device use), not
// when the extension loads, so that a typo never breaks `import torch`; that is
// also after every static registration, so these registrations are the newest
// and win. Throws, naming the variable, if a name is not an aten operator.
void register_forced_fallbacks();

} // namespace at::openreg
