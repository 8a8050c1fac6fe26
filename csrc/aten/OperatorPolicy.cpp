#include "aten/OperatorPolicy.h"

#include <string_view>
#include <unordered_map>

#include <ATen/core/dispatch/Dispatcher.h>

#include "aten/CudaContract.h"
#include "aten/FallbackControls.h"

namespace at::openreg {
namespace {

bool is_optional_generator(const c10::Argument& argument) {
  const c10::TypePtr& type = argument.type();
  return type->kind() == c10::TypeKind::OptionalType && type->containedType(0)->kind() == c10::TypeKind::GeneratorType;
}

// The operators whose result size depends on the input's values.
bool reads_values_for_size(std::string_view name) {
  return name == "aten::nonzero" || name == "aten::masked_select" || name == "aten::_unique" ||
      name == "aten::_unique2" || name == "aten::unique_dim" || name == "aten::unique_consecutive" ||
      name == "aten::unique_dim_consecutive" || name == "aten::repeat_interleave";
}

// The operators whose indices CUDA accepts on the CPU.
bool takes_cpu_indices(std::string_view name) {
  return name == "aten::index" || name == "aten::index_put" || name == "aten::index_put_" ||
      name == "aten::_index_put_impl_" || name == "aten::_unsafe_index" || name == "aten::_unsafe_index_put";
}

// Functional operators besides the pointwise ones whose CPU kernels allocate
// their results and per-call temporaries only: batch normalization, whose
// outputs are as large as its input.
bool allocates_only_results(std::string_view name) {
  return name == "aten::native_batch_norm" || name == "aten::native_batch_norm_backward" ||
      name == "aten::_native_batch_norm_legit" || name == "aten::_native_batch_norm_legit_no_training";
}

OperatorPolicy make_policy(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  OperatorPolicy policy;
  policy.name = schema.operator_name().name;
  if (!schema.overload_name().empty()) {
    policy.name += "." + schema.overload_name();
  }
  policy.counter = counter_for(policy.name);
  policy.cuda_contract = cuda_contract_rule(op);
  // "Computed": an entry may also come from a composite registration.
  for (const c10::DispatchKey key :
       {c10::DispatchKey::CPU, c10::DispatchKey::SparseCPU, c10::DispatchKey::SparseCsrCPU,
        c10::DispatchKey::NestedTensorCPU, c10::DispatchKey::QuantizedCPU}) {
    if (op.hasComputedKernelForDispatchKey(key)) {
      policy.host_kernels = policy.host_kernels.add(key);
    }
  }
  policy.synchronizes = reads_values_for_size(schema.operator_name().name);
  policy.is_collective = schema.operator_name().name.rfind("c10d::", 0) == 0;
  policy.writes_arguments = schema.is_mutable();
  policy.allocates_only_results =
      (op.hasTag(at::Tag::pointwise) || allocates_only_results(schema.operator_name().name)) &&
      !policy.writes_arguments;
  const bool cpu_indices = takes_cpu_indices(schema.operator_name().name);
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (is_optional_generator(arguments[i])) {
      policy.generator_argument = static_cast<int>(i);
    }
    if (cpu_indices && arguments[i].name() == "indices") {
      policy.cpu_indices_argument = static_cast<int>(i);
    }
    const c10::AliasInfo* alias = arguments[i].alias_info();
    policy.written_arguments.push_back(alias != nullptr && alias->isWrite());
  }
  return policy;
}

}  // namespace

const OperatorPolicy& policy_for(const c10::OperatorHandle& op) {
  // Keyed by the schema, which lives as long as the operator's registration.
  thread_local std::unordered_map<const c10::FunctionSchema*, OperatorPolicy> cache;
  const c10::FunctionSchema* schema = &op.schema();
  auto it = cache.find(schema);
  if (it == cache.end()) {
    it = cache.emplace(schema, make_policy(op)).first;
  }
  return it->second;
}

}  // namespace at::openreg
