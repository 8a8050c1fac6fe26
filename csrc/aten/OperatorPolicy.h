#pragma once

#include <string>

#include <c10/core/DispatchKeySet.h>
#include <c10/util/SmallVector.h>

namespace c10 {
class OperatorHandle;
}  // namespace c10

namespace at::openreg {

struct FallbackCounter;
struct CudaContractRule;

// What running an operator on the host needs to know about it, worked out
// once per operator from its schema and dispatch table, for every layout
// (dense, sparse, nested, quantized): the per-call path never walks the
// schema.
struct OperatorPolicy {
  // "aten::add.Tensor": the name every error and fallback_stats() use.
  std::string name;
  FallbackCounter* counter = nullptr;
  // The host keys (CPU, SparseCPU, SparseCsrCPU, NestedTensorCPU,
  // QuantizedCPU) for which PyTorch has a kernel or a composite.
  c10::DispatchKeySet host_kernels;
  // Index of an argument that may hold CPU tensors, as CUDA allows for the
  // indices of advanced indexing; -1 if none.
  int cpu_indices_argument = -1;
  // Index of the `Generator?` argument of a random operator; -1 if none.
  int generator_argument = -1;
  // Per argument: the operator writes it (out=, in-place self), so it must be
  // on the device even as a 0-dim tensor. (Bytes, not std::vector<bool>'s
  // bits: every call reads it.)
  c10::SmallVector<bool, 8> written_arguments;
  // Any of them: without, a CPU kernel changes no argument's metadata or
  // storage, and the fallback skips the write-back (CpuAliases::write_back).
  bool writes_arguments = false;
  // The result's size depends on the input's values, which a real device
  // must send to the host first (sync debug mode reports it).
  bool synchronizes = false;
  // A c10d collective (c10d::allreduce_, ...): the process group's kernels
  // serve dense openreg tensors; its CPU kernels would look for a CPU backend.
  bool is_collective = false;
  // A functional operator tagged pointwise, or batch normalization: its CPU
  // kernel allocates nothing but its results and per-call temporaries (no
  // caches), so on dense tensors the fallback lets it allocate them in device
  // memory (CpuAllocationsOnDevice.h).
  bool allocates_only_results = false;
  // Where CUDA's kernel refuses a dtype, does not exist or alerts under
  // deterministic mode (CudaContract.h); nullptr for most operators.
  const CudaContractRule* cuda_contract = nullptr;
};

// The policy of `op`, cached per thread (lookups take no lock).
const OperatorPolicy& policy_for(const c10::OperatorHandle& op);

}  // namespace at::openreg
