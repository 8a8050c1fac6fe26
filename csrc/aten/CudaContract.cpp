#include "aten/CudaContract.h"

#include <atomic>
#include <bitset>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/UpSample.h>
#include <ATen/ops/result_type.h>

#include "runtime/Options.h"

namespace at::openreg {

using DtypeSet = std::bitset<static_cast<size_t>(c10::ScalarType::NumOptions)>;

namespace {

// A condition with its arguments' positions in the schema.
struct ResolvedCondition {
  RuleCondition when;
  int argument = -1;
  int input = -1;
};

struct ResolvedRefusal {
  DtypeRefusal refusal;
  DtypeSet dtypes;
  std::vector<int> arguments;
  ResolvedCondition condition;
  // For unless_same_size: the input, output_size and scale_factors (if the
  // overload has them).
  int output_size = -1;
  int scale_factors = -1;
};

}  // namespace

struct CudaContractRule {
  std::string name;
  std::vector<DtypeRefusal> refusals;
  std::optional<DtypeWidening> widening;
  std::optional<std::pair<std::string, RuleCondition>> alert;  // caller, condition
  bool missing_on_cuda = false;
  // Filled at the first lookup, when the schema is known.
  bool resolved = false;
  std::vector<ResolvedRefusal> resolved_refusals;
  ResolvedCondition resolved_alert;
  int widened_argument = -1;
  DtypeSet widened_dtypes;
};

namespace {

// -1 until set or first read: OPENREG_CUDA_CONTRACT's value then.
std::atomic<int> g_enabled{-1};
std::mutex g_rules_mutex;
// Never freed: policies on every thread point at the rules.
std::unordered_map<std::string, std::unique_ptr<CudaContractRule>> g_rules;

CudaContractRule& rule_named(const std::string& op_name) {
  auto& rule = g_rules[op_name];
  if (!rule) {
    rule = std::make_unique<CudaContractRule>();
    rule->name = op_name;
  }
  TORCH_CHECK(!rule->resolved, "openreg's CUDA contract: the rule of ", op_name, " changed after its first call");
  return *rule;
}

int index_of(const c10::FunctionSchema& schema, const std::string& rule_name, const std::string& argument) {
  std::optional<int> index = schema.argumentIndexWithName(argument);
  // One operator's overloads may call their first tensor `self` or `input`
  // (upsample_bilinear2d and its .vec).
  if (!index && (argument == "self" || argument == "input")) {
    index = schema.argumentIndexWithName(argument == "self" ? "input" : "self");
  }
  TORCH_CHECK(
      index.has_value(), "openreg's CUDA contract: ", rule_name, " has no argument named '", argument,
      "' (schema: ", schema, ")");
  return *index;
}

ResolvedCondition resolve(const c10::FunctionSchema& schema, const std::string& name, const RuleCondition& when) {
  ResolvedCondition resolved{when, -1, -1};
  if (when.kind != RuleCondition::Kind::Always) {
    resolved.argument = index_of(schema, name, when.argument);
  }
  if (when.kind == RuleCondition::Kind::ResultIsFloatingOrComplex) {
    resolved.input = index_of(schema, name, when.input);
  }
  return resolved;
}

bool is_floating_or_complex(c10::ScalarType dtype) {
  return at::isFloatingType(dtype) || at::isComplexType(dtype);
}

bool holds(const ResolvedCondition& condition, const torch::jit::Stack& stack, size_t begin) {
  using Kind = RuleCondition::Kind;
  const RuleCondition& when = condition.when;
  if (when.kind == Kind::Always) {
    return true;
  }
  const c10::IValue& argument = stack[begin + condition.argument];
  switch (when.kind) {
    case Kind::Always:
      return true;
    case Kind::ArgumentIsNotNone:
      return !argument.isNone();
    case Kind::ArgumentIsFloatingOrComplex:
      return argument.isTensor() && is_floating_or_complex(argument.toTensor().scalar_type());
    case Kind::ResultIsFloatingOrComplex: {
      const c10::IValue& input = stack[begin + condition.input];
      if (!input.isTensor() || input.toTensor().dim() == 0 || input.toTensor().numel() == 0) {
        return false;
      }
      if (argument.isTensor()) {
        return is_floating_or_complex(argument.toTensor().scalar_type());
      }
      if (argument.isInt()) {  // a ScalarType
        return is_floating_or_complex(static_cast<c10::ScalarType>(argument.toInt()));
      }
      return is_floating_or_complex(input.toTensor().scalar_type());
    }
    case Kind::ArgumentEquals:
    case Kind::ArgumentNotEquals: {
      bool equal = false;
      if (argument.isInt()) {
        equal = std::to_string(argument.toInt()) == when.value;
      } else if (argument.isBool()) {
        equal = (argument.toBool() ? "true" : "false") == when.value;
      } else if (argument.isString()) {
        equal = argument.toStringRef() == when.value;
      }
      return when.kind == Kind::ArgumentEquals ? equal : !equal;
    }
  }
  return false;
}

// The dtype the kernel dispatches on: the argument's, or the promoted dtype
// of several (a binary operator's common dtype). Nullopt if none is a tensor.
std::optional<c10::ScalarType> dispatched_dtype(
    const ResolvedRefusal& refusal, const torch::jit::Stack& stack, size_t begin) {
  std::optional<at::Tensor> first;
  std::optional<c10::ScalarType> dtype;
  for (const int index : refusal.arguments) {
    const c10::IValue& value = stack[begin + index];
    if (!value.isTensor() || !value.toTensor().defined()) {
      continue;
    }
    const at::Tensor& t = value.toTensor();
    dtype = first ? at::result_type(*first, t) : t.scalar_type();
    if (!first) {
      first = t;
    }
  }
  return dtype;
}

bool any_empty_tensor(const torch::jit::Stack& stack, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    if (stack[i].isTensor() && stack[i].toTensor().defined() && stack[i].toTensor().numel() == 0) {
      return true;
    }
  }
  return false;
}

// Upsampling's output sizes equal the input's: CUDA's kernel copies.
bool same_spatial_size(const ResolvedRefusal& refusal, const torch::jit::Stack& stack, size_t begin) {
  const at::Tensor& input = stack[begin + refusal.arguments.front()].toTensor();
  const c10::IValue& output_size = stack[begin + refusal.output_size];
  std::optional<std::vector<double>> scales;
  if (refusal.scale_factors >= 0 && !stack[begin + refusal.scale_factors].isNone()) {
    scales = stack[begin + refusal.scale_factors].toDoubleVector();
  }
  std::optional<std::vector<int64_t>> sizes;
  if (!output_size.isNone()) {
    sizes = output_size.toIntVector();
  }
  const c10::SmallVector<int64_t, 3> output = at::native::upsample::compute_output_size(
      input.sizes(), sizes ? at::OptionalIntArrayRef(*sizes) : std::nullopt,
      scales ? std::optional<c10::ArrayRef<double>>(*scales) : std::nullopt);
  return c10::IntArrayRef(output) == input.sizes().slice(2);
}

void resolve_rule(CudaContractRule& rule, const c10::FunctionSchema& schema) {
  for (const DtypeRefusal& refusal : rule.refusals) {
    ResolvedRefusal resolved{refusal, {}, {}, resolve(schema, rule.name, refusal.when), -1, -1};
    for (const c10::ScalarType dtype : refusal.dtypes) {
      resolved.dtypes.set(static_cast<size_t>(dtype));
    }
    for (const std::string& argument : refusal.arguments) {
      resolved.arguments.push_back(index_of(schema, rule.name, argument));
    }
    if (refusal.unless_same_size) {
      resolved.output_size = index_of(schema, rule.name, "output_size");
      resolved.scale_factors = schema.argumentIndexWithName("scale_factors").value_or(-1);
    }
    rule.resolved_refusals.push_back(std::move(resolved));
  }
  if (rule.alert) {
    rule.resolved_alert = resolve(schema, rule.name, rule.alert->second);
  }
  if (rule.widening) {
    TORCH_CHECK(
        !schema.is_mutable(), "openreg's CUDA contract: ", rule.name,
        " writes an argument; only functional overloads can be computed in a wider dtype");
    rule.widened_argument = index_of(schema, rule.name, rule.widening->argument);
    for (const c10::ScalarType dtype : rule.widening->dtypes) {
      rule.widened_dtypes.set(static_cast<size_t>(dtype));
    }
  }
  rule.resolved = true;
}

}  // namespace

void add_dtype_refusal(const std::string& op_name, DtypeRefusal refusal) {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  rule_named(op_name).refusals.push_back(std::move(refusal));
}

void add_dtype_widening(const std::string& op_name, DtypeWidening widening) {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  CudaContractRule& rule = rule_named(op_name);
  TORCH_CHECK(!rule.widening, "openreg's CUDA contract: two widenings for ", op_name);
  rule.widening = std::move(widening);
}

void add_nondeterministic_alert(const std::string& op_name, const std::string& caller, const RuleCondition& when) {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  CudaContractRule& rule = rule_named(op_name);
  TORCH_CHECK(!rule.alert, "openreg's CUDA contract: two nondeterministic alerts for ", op_name);
  rule.alert.emplace(caller, when);
}

void add_operator_missing_on_cuda(const std::string& op_name) {
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  rule_named(op_name).missing_on_cuda = true;
}

const CudaContractRule* cuda_contract_rule(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  std::string name = schema.name();
  if (!schema.overload_name().empty()) {
    name += "." + schema.overload_name();
  }
  std::lock_guard<std::mutex> lock(g_rules_mutex);
  const auto it = g_rules.find(name);
  if (it == g_rules.end()) {
    return nullptr;
  }
  if (!it->second->resolved) {
    resolve_rule(*it->second, schema);
  }
  return it->second.get();
}

const CudaContractRule* cuda_contract_rule(const char* op_name) {
  const std::string_view name(op_name);
  const size_t dot = name.find('.');
  const auto op = c10::Dispatcher::singleton().findSchema(
      {std::string(name.substr(0, dot)), dot == std::string_view::npos ? "" : std::string(name.substr(dot + 1))});
  TORCH_INTERNAL_ASSERT(op.has_value(), "openreg's CUDA contract: no operator ", op_name);
  return cuda_contract_rule(*op);
}

void check_cuda_contract(const CudaContractRule& rule, const torch::jit::Stack& stack, size_t arguments_begin) {
  if (!cuda_contract_enabled()) {
    return;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      !rule.missing_on_cuda, "Could not run '", rule.name,
      "' with arguments from the 'openreg' backend: CUDA has no kernel for this operator, and openreg follows "
      "CUDA's operator set (OPENREG_CUDA_CONTRACT=0 runs it on the CPU's kernel)");
  for (const ResolvedRefusal& refusal : rule.resolved_refusals) {
    const std::optional<c10::ScalarType> dtype = dispatched_dtype(refusal, stack, arguments_begin);
    if (!dtype || !refusal.dtypes.test(static_cast<size_t>(*dtype)) ||
        !holds(refusal.condition, stack, arguments_begin)) {
      continue;
    }
    if ((refusal.refusal.unless_empty && any_empty_tensor(stack, arguments_begin, stack.size())) ||
        (refusal.refusal.unless_same_size && same_spatial_size(refusal, stack, arguments_begin))) {
      continue;
    }
    const std::string& message = refusal.refusal.message;
    if (!message.empty()) {
      std::string text = message;
      const size_t at = text.find("{dtype}");
      if (at != std::string::npos) {
        text.replace(at, 7, c10::toString(*dtype));
      }
      TORCH_CHECK(false, text);
    }
    // AT_DISPATCH's message, as CUDA's kernel raises it.
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, '"', refusal.refusal.kernel, "\" not implemented for '", c10::toString(*dtype), "'");
  }
  if (rule.alert && at::globalContext().deterministicAlgorithms() &&
      holds(rule.resolved_alert, stack, arguments_begin)) {
    at::globalContext().alertNotDeterministic(rule.alert->first);
  }
}

std::optional<c10::ScalarType> widen_host_arguments(
    const CudaContractRule& rule, torch::jit::Stack& stack, size_t arguments_begin) {
  if (rule.widened_argument < 0 || !cuda_contract_enabled()) {
    return std::nullopt;
  }
  const c10::IValue& argument = stack[arguments_begin + rule.widened_argument];
  if (!argument.isTensor() || !rule.widened_dtypes.test(static_cast<size_t>(argument.toTensor().scalar_type()))) {
    return std::nullopt;
  }
  const c10::ScalarType dtype = argument.toTensor().scalar_type();
  for (size_t i = arguments_begin; i < stack.size(); ++i) {
    if (stack[i].isTensor() && stack[i].toTensor().defined() && stack[i].toTensor().scalar_type() == dtype) {
      stack[i] = stack[i].toTensor().to(rule.widening->computed_as);
    }
  }
  return dtype;
}

void narrow_host_results(torch::jit::Stack& stack, size_t num_returns, c10::ScalarType dtype) {
  for (size_t i = stack.size() - num_returns; i < stack.size(); ++i) {
    if (stack[i].isTensor() && stack[i].toTensor().defined()) {
      stack[i] = stack[i].toTensor().to(dtype);
    }
  }
}

void set_cuda_contract_enabled(bool enabled) {
  g_enabled.store(enabled ? 1 : 0, std::memory_order_relaxed);
}

bool cuda_contract_enabled() {
  int enabled = g_enabled.load(std::memory_order_relaxed);
  if (C10_UNLIKELY(enabled < 0)) {
    int unset = -1;
    g_enabled.compare_exchange_strong(unset, c10::openreg::cuda_contract_option() ? 1 : 0, std::memory_order_relaxed);
    enabled = g_enabled.load(std::memory_order_relaxed);
  }
  return enabled == 1;
}

}  // namespace at::openreg
