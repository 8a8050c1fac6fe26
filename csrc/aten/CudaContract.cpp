#include "aten/CudaContract.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bitset>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/TypeProperties.h>
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
  int last_dim_size = -1;  // for SignalSizeNotPowerOfTwo, if the overload has it
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
  std::vector<DtypeWidening> widenings;
  std::optional<std::pair<std::string, RuleCondition>> alert;  // caller, condition
  bool missing_on_cuda = false;
  // Filled at the first lookup, when the schema is known.
  bool resolved = false;
  std::vector<ResolvedRefusal> resolved_refusals;
  ResolvedCondition resolved_alert;
  int widened_argument = -1;
  // A pointwise operator: an in-place or out= call checks, as its iterator
  // does, that the inputs' promoted dtype fits the written tensor.
  bool widened_call_checks_cast = false;
  // Per dtype of that argument: the one the host computes in (Undefined: none).
  std::array<c10::ScalarType, static_cast<size_t>(c10::ScalarType::NumOptions)> widened_to;
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
  if (when.kind == RuleCondition::Kind::ResultIsFloatingOrComplex ||
      when.kind == RuleCondition::Kind::SignalSizeNotPowerOfTwo) {
    resolved.input = index_of(schema, name, when.input);
  }
  if (when.kind == RuleCondition::Kind::SignalSizeNotPowerOfTwo) {
    resolved.last_dim_size = schema.argumentIndexWithName("last_dim_size").value_or(-1);
  }
  return resolved;
}

bool is_floating_or_complex(c10::ScalarType dtype) {
  return at::isFloatingType(dtype) || at::isComplexType(dtype);
}

// The sizes an FFT plan transforms, as cuFFT's plan sees them.
std::vector<int64_t> signal_sizes(const ResolvedCondition& condition, const torch::jit::Stack& stack, size_t begin) {
  const at::Tensor& input = stack[begin + condition.input].toTensor();
  std::vector<int64_t> sizes;
  for (const int64_t dim : stack[begin + condition.argument].toIntVector()) {
    sizes.push_back(input.size(dim));
  }
  if (condition.last_dim_size >= 0 && !sizes.empty()) {
    sizes.back() = stack[begin + condition.last_dim_size].toInt();
  }
  return sizes;
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
    case Kind::SignalSizeNotPowerOfTwo: {
      const std::vector<int64_t> sizes = signal_sizes(condition, stack, begin);
      return std::any_of(
          sizes.begin(), sizes.end(), [](int64_t size) { return size <= 0 || (size & (size - 1)) != 0; });
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

void resolve_rule(CudaContractRule& rule, const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
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
  rule.widened_to.fill(c10::ScalarType::Undefined);
  rule.widened_call_checks_cast = op.hasTag(at::Tag::pointwise);
  for (const DtypeWidening& widening : rule.widenings) {
    const int argument = index_of(schema, rule.name, widening.argument);
    TORCH_CHECK(
        rule.widened_argument < 0 || rule.widened_argument == argument, "openreg's CUDA contract: ", rule.name,
        "'s widenings name different arguments");
    rule.widened_argument = argument;
    for (const c10::ScalarType dtype : widening.dtypes) {
      c10::ScalarType& to = rule.widened_to[static_cast<size_t>(dtype)];
      TORCH_CHECK(
          to == c10::ScalarType::Undefined, "openreg's CUDA contract: two widenings of ", dtype, " for ", rule.name);
      to = widening.computed_as;
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
  rule_named(op_name).widenings.push_back(std::move(widening));
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
    resolve_rule(*it->second, op);
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
      const auto fill = [&text](std::string_view name, const std::string& value) {
        const size_t at = text.find(name);
        if (at != std::string::npos) {
          text.replace(at, name.size(), value);
        }
      };
      fill("{dtype}", c10::toString(*dtype));
      if (refusal.condition.when.kind == RuleCondition::Kind::SignalSizeNotPowerOfTwo) {
        fill("{signal_size}", c10::str(c10::IntArrayRef(signal_sizes(refusal.condition, stack, arguments_begin))));
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

namespace {

// `dtype` as the host computes a call widened from `from` to `to`: the
// widened dtype itself, and its real or complex counterpart (complex32's abs
// is half; a half rfft's result complex32). Undefined if unchanged.
c10::ScalarType counterpart(c10::ScalarType dtype, c10::ScalarType from, c10::ScalarType to) {
  c10::ScalarType mapped = c10::ScalarType::Undefined;
  if (dtype == from) {
    mapped = to;
  } else if (at::isComplexType(from) && at::isComplexType(to) && dtype == c10::toRealValueType(from)) {
    mapped = c10::toRealValueType(to);
  } else if (
      at::isFloatingType(from) && !c10::isFloat8Type(from) && at::isFloatingType(to) &&
      dtype == c10::toComplexType(from)) {
    mapped = c10::toComplexType(to);
  }
  return mapped == dtype ? c10::ScalarType::Undefined : mapped;
}

// What a pointwise operator's iterator checks before it computes: the
// inputs' promoted dtype can be cast to each written tensor's (complex32
// `x.div_(complex64)` raises). The wider call could not tell.
void check_written_dtypes(const torch::jit::Stack& stack, size_t begin, c10::ArrayRef<bool> written) {
  at::native::ResultTypeState state;
  for (size_t i = 0; i < written.size(); ++i) {
    if (!written[i] && stack[begin + i].isTensor() && stack[begin + i].toTensor().defined()) {
      state = at::native::update_result_type_state(stack[begin + i].toTensor(), state);
    }
  }
  const c10::ScalarType common = at::native::result_type(state);
  for (size_t i = 0; i < written.size(); ++i) {
    if (written[i] && stack[begin + i].isTensor() && common != c10::ScalarType::Undefined) {
      const c10::ScalarType output = stack[begin + i].toTensor().scalar_type();
      TORCH_CHECK(
          c10::canCast(common, output), "result type ", common, " can't be cast to the desired output type ", output);
    }
  }
}

}  // namespace

std::optional<WidenedCall> widen_host_arguments(
    const CudaContractRule& rule, torch::jit::Stack& stack, size_t arguments_begin, c10::ArrayRef<bool> written) {
  if (rule.widened_argument < 0 || !cuda_contract_enabled()) {
    return std::nullopt;
  }
  const c10::IValue& argument = stack[arguments_begin + rule.widened_argument];
  if (!argument.isTensor() || !argument.toTensor().defined()) {
    return std::nullopt;
  }
  const c10::ScalarType from = argument.toTensor().scalar_type();
  const c10::ScalarType to = rule.widened_to[static_cast<size_t>(from)];
  if (to == c10::ScalarType::Undefined) {
    return std::nullopt;
  }
  if (rule.widened_call_checks_cast) {
    check_written_dtypes(stack, arguments_begin, written);
  }
  WidenedCall call{from, to, {}};
  for (size_t i = 0; i < written.size(); ++i) {
    c10::IValue& value = stack[arguments_begin + i];
    if (!value.isTensor() || !value.toTensor().defined()) {
      continue;
    }
    const c10::ScalarType wider = counterpart(value.toTensor().scalar_type(), from, to);
    if (wider == c10::ScalarType::Undefined) {
      continue;
    }
    at::Tensor copy = value.toTensor().to(wider);
    if (written[i]) {
      call.written.emplace_back(value.toTensor(), copy);
    }
    value = std::move(copy);
  }
  return call;
}

void narrow_host_results(const WidenedCall& call, torch::jit::Stack& stack, size_t num_returns) {
  for (auto& [view, copy] : call.written) {
    if (view.sizes() != copy.sizes()) {
      view.resize_(copy.sizes());  // an out= result the kernel resized
    }
    view.copy_(copy);
  }
  for (size_t i = stack.size() - num_returns; i < stack.size(); ++i) {
    if (!stack[i].isTensor() || !stack[i].toTensor().defined()) {
      continue;
    }
    const at::Tensor& result = stack[i].toTensor();
    const auto written = std::find_if(
        call.written.begin(), call.written.end(), [&](const auto& pair) { return pair.second.is_same(result); });
    if (written != call.written.end()) {
      stack[i] = written->first;
      continue;
    }
    const c10::ScalarType narrower = counterpart(result.scalar_type(), call.to, call.from);
    if (narrower != c10::ScalarType::Undefined) {
      stack[i] = result.to(narrower);
    }
  }
}

c10::ScalarType widened_dtype(const CudaContractRule* rule, c10::ScalarType dtype) {
  if (rule == nullptr || !cuda_contract_enabled()) {
    return c10::ScalarType::Undefined;
  }
  return rule->widened_to[static_cast<size_t>(dtype)];
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
