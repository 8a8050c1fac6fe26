#include "aten/FallbackPipeline.h"

#include <optional>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>

#include "aten/CpuAliases.h"
#include "aten/CudaContract.h"
#include "aten/DeviceCall.h"
#include "aten/FallbackControls.h"
#include "aten/CpuAllocationsOnDevice.h"
#include "aten/IValueTensors.h"
#include "aten/OperatorPolicy.h"
#include "runtime/OpenRegGenerator.h"
#include "runtime/OpenRegSynchronizingCall.h"
#include "runtime/Options.h"

namespace at::openreg {
namespace {

// The CPU's key for the functionality `device_key` stands for.
c10::DispatchKey host_key_for(c10::DispatchKey device_key) {
  return c10::toRuntimePerBackendFunctionalityKey(c10::toFunctionalityKey(device_key), c10::BackendComponent::CPUBit);
}

// Otherwise the CPU dispatch would fail naming the CPU's key.
void check_host_kernel(const OperatorPolicy& policy, c10::DispatchKey device_key, c10::DispatchKey host_key) {
  if (policy.host_kernels.has(host_key)) {
    return;
  }
  if (host_key == c10::DispatchKey::CPU) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, "The operator '", policy.name,
        "' is not implemented for the openreg device: it has no openreg kernel and no CPU kernel "
        "to fall back to.");
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "Could not run '", policy.name, "' with arguments from the '", device_key,
      "' backend (openreg tensors): it has no openreg kernel, and openreg runs such calls with the CPU's ", host_key,
      " kernels, of which the CPU has none for this operator");
}

// CUDA's rule (DeviceCheck.h), with what the policy knows: written arguments
// must be on the device, advanced indexing takes CPU indices.
c10::Device check_devices(const OperatorPolicy& policy, const torch::jit::Stack& stack, size_t arguments_begin) {
  DeviceCheck check(policy.name);
  for (size_t i = 0; i < policy.written_arguments.size(); ++i) {
    const c10::IValue& value = stack[arguments_begin + i];
    if (value.isDevice()) {
      if (value.toDevice().is_privateuseone()) {
        check.see(value.toDevice());
      }
    } else if (policy.written_arguments[i]) {
      for_each_tensor(value, [&](const at::Tensor& t) { check.check_written(t); });
    } else {
      const bool cpu_allowed = static_cast<int>(i) == policy.cpu_indices_argument;
      for_each_tensor(value, [&](const at::Tensor& t) { check.check(t, cpu_allowed); });
    }
  }
  return check.device();
}

// Advanced indexing with a boolean mask on the device: CUDA turns the mask
// into indices (nonzero), which waits for the device.
bool indexes_with_device_mask(const OperatorPolicy& policy, const torch::jit::Stack& stack, size_t arguments_begin) {
  bool mask = false;
  for_each_tensor(stack[arguments_begin + policy.cpu_indices_argument], [&](const at::Tensor& t) {
    mask =
        mask || (t.defined() && t.is_privateuseone() && (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte));
  });
  return mask;
}

// An argument's host counterpart; `written` as in CpuAliases::alias.
at::Tensor host_argument(CpuAliases& views, const at::Tensor& t, bool written) {
  at::Tensor host = views.alias(t, written);
  // Some CPU kernels save what only the backward pass needs when an input
  // requires grad (_sparse_mm_reduce_impl's arg-max indices), as they do for
  // the CPU tensors the caller would have passed. Below autograd this
  // records nothing. An integer tensor can carry requires_grad too (the
  // result of an in-place comparison with an operand that requires grad),
  // which a CPU tensor refuses to be given: the kernel has nothing to save.
  const bool differentiable = at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type());
  if (differentiable && t.requires_grad() && !host.requires_grad()) {
    host.set_requires_grad(true);
  }
  return host;
}

}  // namespace

void run_on_host(
    const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey device_key, KernelAllocations results) {
  const OperatorPolicy& policy = policy_for(op);
  check_fallback_enabled(policy);
  if (policy.synchronizes) {
    c10::openreg::on_synchronizing_call(policy.name.c_str());
  }
  // Only other layouts get here: c10d registers its kernels for dense
  // PrivateUse1 tensors, which the orccl backend serves (as NCCL serves dense
  // CUDA tensors). The CPU kernel would ask the group for a CPU backend.
  TORCH_CHECK_NOT_IMPLEMENTED(
      !policy.is_collective, policy.name, ": collectives on openreg take dense (strided) tensors, got ", device_key,
      " tensors; convert them first (to_dense(), dequantize(), ...)");
  const c10::DispatchKey host_key = host_key_for(device_key);
  check_host_kernel(policy, device_key, host_key);

  const size_t num_arguments = policy.written_arguments.size();
  const size_t arguments_begin = stack->size() - num_arguments;
  const DeviceCall call(policy.name, check_devices(policy, *stack, arguments_begin));
  if (policy.cpu_indices_argument >= 0 && indexes_with_device_mask(policy, *stack, arguments_begin)) {
    c10::openreg::on_synchronizing_call(policy.name.c_str());
  }
  if (policy.cuda_contract != nullptr) {
    check_cuda_contract(*policy.cuda_contract, *stack, arguments_begin);
  }

  // Random operators draw from the device's generator, never the CPU's.
  if (policy.generator_argument >= 0) {
    c10::IValue& generator = (*stack)[arguments_begin + policy.generator_argument];
    generator = c10::openreg::host_generator_for(
        generator.isNone() ? std::nullopt : std::optional<at::Generator>(generator.toGenerator()), call.device());
  }

  count_fallback_call(policy);

  if (host_key == c10::DispatchKey::CPU && c10::openreg::fallback_options().mode == c10::openreg::FallbackMode::Copy) {
    at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
    return;
  }

  // The arguments replaced by host views stay alive here: CpuAliases borrows
  // the openreg tensors, and the stack may have held their only reference.
  c10::SmallVector<c10::IValue, 8> arguments;
  c10::SmallVector<size_t, 8> positions;  // their indices in the schema
  for (size_t i = 0; i < num_arguments; ++i) {
    c10::IValue& value = (*stack)[arguments_begin + i];
    if (value.isDevice()) {
      if (value.toDevice().is_privateuseone()) {
        value = c10::Device(c10::kCPU);  // factories: build on the host view
      }
    } else if (value.isTensor() || value.isTensorList() || value.isOptionalTensorList()) {
      arguments.push_back(std::move(value));
      positions.push_back(i);
    }
  }
  CpuAliases views(call.device(), policy.name);
  // Their storages open with one batched access. (A Tensor?[] hands out its
  // tensors as copies, which cannot be pointed at: alias() opens those.)
  c10::SmallVector<const at::Tensor*, 8> tensors;
  for (const c10::IValue& value : arguments) {
    if (value.isTensor()) {
      tensors.push_back(&value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) {
        tensors.push_back(&t);
      }
    }
  }
  views.open(tensors);
  for (size_t k = 0; k < arguments.size(); ++k) {
    const bool written = policy.written_arguments[positions[k]];
    (*stack)[arguments_begin + positions[k]] =
        map_tensors(arguments[k], [&](const at::Tensor& t) { return host_argument(views, t, written); });
  }

  // A dtype CUDA computes and the CPU does not: computed in a wider one.
  const std::optional<WidenedCall> widened = policy.cuda_contract == nullptr
      ? std::nullopt
      : widen_host_arguments(*policy.cuda_contract, *stack, arguments_begin, policy.written_arguments);
  std::optional<AllocateResultsOnDevice> on_device;
  if (results == KernelAllocations::OnDevice || (policy.allocates_only_results && host_key == c10::DispatchKey::CPU)) {
    on_device.emplace();
  }
  op.redispatchBoxed(c10::DispatchKeySet(host_key), stack);
  on_device.reset();
  if (widened) {
    narrow_host_results(*widened, *stack, op.schema().returns().size());
  }

  if (policy.writes_arguments) {
    views.write_back();
  }
  const size_t num_returns = op.schema().returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
    (*stack)[i] = map_tensors((*stack)[i], [&](const at::Tensor& t) { return views.to_device(t); });
  }
}

}  // namespace at::openreg
