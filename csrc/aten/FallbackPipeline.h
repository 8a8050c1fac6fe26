#pragma once

#include <ATen/core/stack.h>
#include <c10/core/DispatchKey.h>

namespace c10 {
class OperatorHandle;
}  // namespace c10

namespace at::openreg {

// The one pipeline every boxed host call goes through: the dense fallback
// (PrivateUse1), the sparse ones (SparsePrivateUse1, SparseCsrPrivateUse1),
// the nested one (NestedTensorPrivateUse1) and the quantized operators
// (QuantizedPrivateUse1). `device_key` is the openreg key the call arrived on;
// the kernel that runs is the CPU's for the same functionality (CPU,
// SparseCPU, SparseCsrCPU, NestedTensorCPU, QuantizedCPU).
//
//  1. the operator's policy (OperatorPolicy.h), computed once;
//  2. strict mode, and a clear error if the CPU has no kernel to run;
//  3. CUDA's device check over the arguments, and the device guard
//     (DeviceCall);
//  4. the device's generator in place of a random operator's generator;
//  5. the count in fallback_stats();
//  6. arguments replaced by host views (CpuAliases: strided, nested and sparse
//     layouts each map their own way), the CPU kernel, the write-back of what
//     it did to the arguments, and results mapped back to the device.
//
// `results` says where the CPU kernel's own allocations go. In host memory,
// a fresh result is copied to the device once. On the device
// (CpuAllocationsOnDevice.h), it is handed over as is; every other allocation
// of the kernel then costs device memory too, which suits kernels that
// allocate little besides their results (the TensorIterator operators of
// StructuredDefaults.cpp, and on dense tensors every functional operator
// tagged pointwise and batch normalization:
// OperatorPolicy::allocates_only_results), not those that keep caches.
enum class KernelAllocations { InHostMemory, OnDevice };

void run_on_host(
    const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey device_key,
    KernelAllocations results = KernelAllocations::InHostMemory);

}  // namespace at::openreg
