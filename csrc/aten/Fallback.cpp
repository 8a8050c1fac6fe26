// The CPU fallback: every operator without an openreg kernel runs its CPU
// kernel directly on device memory (see HostView.h), after the same device
// checks CUDA makes, so a tensor left on the CPU is still an error.
//
// Controls (runtime/Options.h parses them):
//   OPENREG_FALLBACK_MODE=copy  PyTorch's own at::native::cpu_fallback, which
//                               copies every argument to the CPU and back
//                               (to measure what zero-copy saves);
//   OPENREG_FALLBACK=0          strict: an operator without an openreg kernel
//                               raises NotImplementedError naming it;
//   OPENREG_FALLBACK_WARN=1     warn once per operator that falls back;
//   OPENREG_FALLBACK_OPS=a,b    send these operators to the fallback even
//                               where an openreg kernel exists (debugging).
// Every call is counted per operator (torch.openreg.fallback_stats()).
#include "aten/Fallback.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "aten/DeviceCall.h"
#include "aten/HostView.h"
#include "aten/IValueTensors.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGenerator.h"
#include "runtime/Options.h"

namespace at::openreg {
namespace {

// One per operator that ever fell back; never freed, so policies may point at
// them from any thread.
struct FallbackCounter {
  std::atomic<uint64_t> calls{0};
  std::atomic<bool> warned{false};
};

std::mutex g_counters_mutex;
std::unordered_map<std::string, std::unique_ptr<FallbackCounter>> g_counters;

FallbackCounter* counter_for(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_counters_mutex);
  auto& counter = g_counters[name];
  if (!counter) {
    counter = std::make_unique<FallbackCounter>();
  }
  return counter.get();
}

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
  const c10::OperatorName& name = op.schema().operator_name();
  const std::string base = name.name.substr(name.name.find("::") + 2);
  TORCH_CHECK_NOT_IMPLEMENTED(
      false,
      "The operator '",
      name.name,
      name.overload_name.empty() ? "" : ".",
      name.overload_name,
      "' is not supported on the openreg device: ",
      blocklist().at(base));
}

// What the fallback needs to know about an operator, worked out once from its
// schema (the per-call path then never walks the schema).
struct OpPolicy {
  std::string name;
  FallbackCounter* counter = nullptr;
  bool has_cpu_kernel = false;
  // Index of an argument that may hold CPU tensors, as CUDA allows for the
  // indices of advanced indexing; -1 if none.
  int cpu_indices_argument = -1;
  // Index of the `Generator?` argument of a random operator; -1 if none.
  int generator_argument = -1;
  // Per argument: the operator writes it (out=, in-place self), so it must be
  // on the device even as a 0-dim tensor.
  std::vector<bool> written_arguments;
};

const OpPolicy& policy_for(const c10::OperatorHandle& op) {
  // Per thread, so that lookups take no lock; an entry is a few strings.
  thread_local std::unordered_map<const c10::FunctionSchema*, OpPolicy> cache;
  const c10::FunctionSchema& schema = op.schema();
  auto it = cache.find(&schema);
  if (it != cache.end()) {
    return it->second;
  }
  OpPolicy policy;
  policy.name = schema.operator_name().name;
  if (!schema.overload_name().empty()) {
    policy.name += "." + schema.overload_name();
  }
  policy.counter = counter_for(policy.name);
  // "Computed": a CPU entry may also come from a composite registration.
  policy.has_cpu_kernel = op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU);
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].type()->str() == "Generator?") {
      policy.generator_argument = static_cast<int>(i);
    }
    const c10::AliasInfo* alias = arguments[i].alias_info();
    policy.written_arguments.push_back(alias != nullptr && alias->isWrite());
  }
  const std::string_view base = schema.operator_name().name;
  if (base == "aten::index" || base == "aten::index_put" || base == "aten::index_put_" ||
      base == "aten::_index_put_impl_" || base == "aten::_unsafe_index" ||
      base == "aten::_unsafe_index_put") {
    for (size_t i = 0; i < arguments.size(); ++i) {
      if (arguments[i].name() == "indices") {
        policy.cpu_indices_argument = static_cast<int>(i);
      }
    }
  }
  return cache.emplace(&schema, std::move(policy)).first->second;
}

// OPENREG_FALLBACK=0 (strict): an operator without an openreg kernel raises.
void check_enabled(const OpPolicy& policy) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      c10::openreg::fallback_options().enabled,
      "The operator '",
      policy.name,
      "' has no openreg kernel, and OPENREG_FALLBACK=0 forbids running it on the CPU fallback.");
}

// fallback_stats(), and OPENREG_FALLBACK_WARN's warning once per operator.
void count_call(const OpPolicy& policy) {
  policy.counter->calls.fetch_add(1, std::memory_order_relaxed);
  if (c10::openreg::fallback_options().warn && !policy.counter->warned.exchange(true)) {
    TORCH_WARN("The operator '", policy.name, "' has no openreg kernel and runs on the CPU fallback.");
  }
}

} // namespace

void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey host_key) {
  const OpPolicy& policy = policy_for(op);
  check_enabled(policy);
  if (host_key == c10::DispatchKey::CPU) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        policy.has_cpu_kernel,
        "The operator '",
        policy.name,
        "' is not implemented for the openreg device: it has no openreg kernel and no CPU kernel "
        "to fall back to.");
  } else {
    TORCH_CHECK_NOT_IMPLEMENTED(
        op.hasComputedKernelForDispatchKey(host_key),
        "The operator '",
        policy.name,
        "' is not implemented for these arguments on the openreg device: it has no openreg kernel, and "
        "PyTorch has no ",
        host_key,
        " kernel to fall back to.");
  }

  const size_t num_arguments = op.schema().arguments().size();
  const size_t arguments_begin = stack->size() - num_arguments;

  DeviceCheck check(policy.name);
  for (size_t i = 0; i < num_arguments; ++i) {
    const c10::IValue& value = (*stack)[arguments_begin + i];
    if (value.isDevice()) {
      if (value.toDevice().is_privateuseone()) {
        check.see(value.toDevice());
      }
      continue;
    }
    if (policy.written_arguments[i]) {
      for_each_tensor(value, [&](const at::Tensor& t) { check.check_written(t); });
      continue;
    }
    const bool cpu_allowed = static_cast<int>(i) == policy.cpu_indices_argument;
    for_each_tensor(value, [&](const at::Tensor& t) { check.check(t, cpu_allowed); });
  }
  const DeviceCall call(policy.name, check.device());
  const c10::Device device = call.device();

  // Random operators draw from the device's generator, never the CPU's.
  if (policy.generator_argument >= 0) {
    c10::IValue& generator = (*stack)[arguments_begin + policy.generator_argument];
    generator = c10::openreg::host_generator_for(
        generator.isNone() ? std::nullopt : std::optional<at::Generator>(generator.toGenerator()),
        device);
  }

  count_call(policy);

  if (c10::openreg::fallback_options().mode == c10::openreg::FallbackMode::Copy) {
    at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
    return;
  }

  // The arguments replaced by host views stay alive here: HostViews borrows
  // the openreg tensors, and the stack may have held their only reference.
  c10::SmallVector<c10::IValue, 8> arguments;
  HostViews views(device, policy.name);
  for (size_t i = arguments_begin; i < arguments_begin + num_arguments; ++i) {
    c10::IValue& value = (*stack)[i];
    if (value.isDevice()) {
      if (value.toDevice().is_privateuseone()) {
        value = c10::Device(c10::kCPU);  // factories: build on the host view
      }
    } else if (value.isTensor() || value.isTensorList() || value.isOptionalTensorList()) {
      arguments.push_back(std::move(value));
      value = map_tensors(arguments.back(), [&](const at::Tensor& t) {
        return t.defined() && t.is_privateuseone() ? views.alias(t) : t;
      });
    }
  }

  op.redispatchBoxed(c10::DispatchKeySet(host_key), stack);

  views.write_back();
  const size_t num_returns = op.schema().returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
    (*stack)[i] = map_tensors((*stack)[i], [&](const at::Tensor& t) { return views.to_device(t); });
  }
}

void host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_host(op, stack, c10::DispatchKey::CPU);
}

void count_fallback_call(const c10::OperatorHandle& op) {
  const OpPolicy& policy = policy_for(op);
  check_enabled(policy);
  count_call(policy);
}

std::vector<std::pair<std::string, uint64_t>> fallback_stats() {
  std::vector<std::pair<std::string, uint64_t>> stats;
  std::lock_guard<std::mutex> lock(g_counters_mutex);
  for (const auto& [name, counter] : g_counters) {
    if (const uint64_t calls = counter->calls.load(std::memory_order_relaxed)) {
      stats.emplace_back(name, calls);
    }
  }
  std::sort(stats.begin(), stats.end());
  return stats;
}

void reset_fallback_stats() {
  std::lock_guard<std::mutex> lock(g_counters_mutex);
  for (auto& [name, counter] : g_counters) {
    counter->calls.store(0, std::memory_order_relaxed);
  }
}

void register_forced_fallbacks() {
  // A failed call registers nothing, so the next device use reports the same
  // error; a successful one is not repeated.
  static std::once_flag registered;
  std::call_once(registered, [] {
    const std::vector<std::string>& ops = c10::openreg::fallback_options().forced_ops;
    for (const std::string& op : ops) {
      const auto dot = op.find('.');
      const c10::OperatorName name(
          "aten::" + op.substr(0, dot), dot == std::string::npos ? "" : op.substr(dot + 1));
      TORCH_CHECK(
          c10::Dispatcher::singleton().findSchema(name).has_value(),
          "OPENREG_FALLBACK_OPS names '",
          op,
          "', which is not an aten operator (write e.g. 'add.Tensor' or 'aten::mm')");
    }
    if (ops.empty()) {
      return;
    }
    static torch::Library library(
        torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    for (const std::string& op : ops) {
      library.impl(op.c_str(), torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
    }
  });
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
}

// The per-operator form of the same fallback: what a vendor writes to route a
// chosen operator to the host explicitly, visible in the dispatch table as a
// PrivateUse1 kernel rather than as the backend fallback.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("remainder.Tensor", torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
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
  //  - mode.values: a composite that accepts only CPU, CUDA and XPU tensors.
  for (const char* name : {"_stack", "_stack.out", "addr", "addr_", "addr.out", "all.dims_out", "any.dims_out",
                           "linalg__powsum", "mish_backward", "native_channel_shuffle", "native_group_norm",
                           "native_layer_norm", "pixel_shuffle", "pixel_unshuffle", "silu_backward",
                           "mse_loss", "conj_physical_", "_conj_physical", "mode.values"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
  }
  // index.Tensor: the structured "NonFunctional" default runs the meta
  // function, then index.Tensor_out, whose CPU kernel runs it again, so the
  // meta's warnings (indexing with a uint8 mask is deprecated) fired twice.
  m.impl("index.Tensor", torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
  for (const auto& [name, reason] : blocklist()) {
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&blocked_operator>());
  }
}

} // namespace at::openreg
