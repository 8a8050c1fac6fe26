// The CPU fallback: every operator without an openreg kernel runs its CPU
// kernel directly on device memory (see HostView.h), after the same device
// checks CUDA makes, so a tensor left on the CPU is still an error.
//
// OPENREG_FALLBACK_MODE=copy switches to PyTorch's own at::native::cpu_fallback,
// which copies every argument to the CPU and back; it exists to measure what
// the zero-copy design saves (benchmarks/fallback.py).
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/HostView.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGenerator.h"

namespace at::openreg {
namespace {

enum class FallbackMode { ZeroCopy, Copy };

FallbackMode fallback_mode() {
  static const FallbackMode mode = [] {
    const char* env = std::getenv("OPENREG_FALLBACK_MODE");
    const std::string value = env ? env : "";
    if (value.empty() || value == "zero_copy") {
      return FallbackMode::ZeroCopy;
    }
    TORCH_CHECK_VALUE(
        value == "copy",
        "OPENREG_FALLBACK_MODE='",
        value,
        "' is invalid: expected 'zero_copy' (default) or 'copy'");
    return FallbackMode::Copy;
  }();
  return mode;
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
  bool has_cpu_kernel = false;
  // Index of an argument that may hold CPU tensors, as CUDA allows for the
  // indices of advanced indexing; -1 if none.
  int cpu_indices_argument = -1;
  // Index of the `Generator?` argument of a random operator; -1 if none.
  int generator_argument = -1;
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
  policy.has_cpu_kernel = op.hasKernelForDispatchKey(c10::DispatchKey::CPU);
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].type()->str() == "Generator?") {
      policy.generator_argument = static_cast<int>(i);
    }
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

// The device the call runs on, checked the way CUDA checks it: all tensors on
// one openreg device, except 0-dim CPU tensors (scalars) and CPU indices.
class DeviceCheck {
 public:
  explicit DeviceCheck(const OpPolicy& policy) : policy_(policy) {}

  void check(const at::Tensor& t, bool cpu_allowed) {
    if (!t.defined()) {
      return;
    }
    const c10::Device d = t.device();
    if (d.is_privateuseone()) {
      see(d);
    } else if (!(d.is_cpu() && (cpu_allowed || t.dim() == 0))) {
      mismatch(d);
    }
  }

  void see(c10::Device d) {
    if (d.index() < 0) {
      d = c10::openreg::make_device(c10::openreg::current_device());
    }
    if (!device_) {
      device_ = d;
    } else if (*device_ != d) {
      mismatch(d);
    }
  }

  c10::Device device() const {
    return device_.value_or(c10::openreg::make_device(c10::openreg::current_device()));
  }

 private:
  [[noreturn]] void mismatch(c10::Device other) const {
    TORCH_CHECK(
        false,
        "Expected all tensors to be on the same device, but found at least two devices, ",
        device(),
        " and ",
        other,
        "! (when checking the arguments of ",
        policy_.name,
        " on openreg)");
  }

  const OpPolicy& policy_;
  std::optional<c10::Device> device_;
};

template <typename Fn>
void for_each_tensor(const c10::IValue& value, Fn&& fn) {
  if (value.isTensor()) {
    fn(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList()) {
      fn(t);
    }
  } else if (value.isOptionalTensorList()) {
    for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
      if (t.has_value()) {
        fn(*t);
      }
    }
  }
}

// Replaces each openreg tensor in `value` (also inside lists) by `fn(tensor)`.
template <typename Fn>
c10::IValue map_tensors(const c10::IValue& value, Fn&& fn) {
  auto map_one = [&](const at::Tensor& t) {
    return t.defined() && t.device().is_privateuseone() ? fn(t) : t;
  };
  if (value.isTensor()) {
    return map_one(value.toTensor());
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    out.reserve(value.toTensorList().size());
    for (const at::Tensor& t : value.toTensorList()) {
      out.push_back(map_one(t));
    }
    return out;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(map_one(*t)) : std::nullopt);
    }
    return out;
  }
  return value;
}

// Like map_tensors, for results: every tensor is a CPU tensor to bring back.
template <typename Fn>
c10::IValue map_results(const c10::IValue& value, Fn&& fn) {
  if (value.isTensor()) {
    return fn(value.toTensor());
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : value.toTensorList()) {
      out.push_back(fn(t));
    }
    return out;
  }
  return value;
}

} // namespace

void host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpPolicy& policy = policy_for(op);
  TORCH_CHECK_NOT_IMPLEMENTED(
      policy.has_cpu_kernel,
      "The operator '",
      policy.name,
      "' is not implemented for the openreg device: it has no openreg kernel and no CPU kernel "
      "to fall back to.");

  const size_t num_arguments = op.schema().arguments().size();
  const size_t arguments_begin = stack->size() - num_arguments;

  DeviceCheck check(policy);
  for (size_t i = 0; i < num_arguments; ++i) {
    const c10::IValue& value = (*stack)[arguments_begin + i];
    if (value.isDevice()) {
      if (value.toDevice().is_privateuseone()) {
        check.see(value.toDevice());
      }
      continue;
    }
    const bool cpu_allowed = static_cast<int>(i) == policy.cpu_indices_argument;
    for_each_tensor(value, [&](const at::Tensor& t) { check.check(t, cpu_allowed); });
  }
  const c10::Device device = check.device();
  c10::DeviceGuard guard(device);

  // Random operators draw from the device's generator, never the CPU's.
  if (policy.generator_argument >= 0) {
    c10::IValue& generator = (*stack)[arguments_begin + policy.generator_argument];
    generator = c10::openreg::host_generator_for(
        generator.isNone() ? std::nullopt : std::optional<at::Generator>(generator.toGenerator()),
        device);
  }

  if (fallback_mode() == FallbackMode::Copy) {
    at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
    return;
  }

  HostViews views(device, policy.name);
  for (size_t i = arguments_begin; i < arguments_begin + num_arguments; ++i) {
    c10::IValue& value = (*stack)[i];
    if (value.isDevice()) {
      if (value.toDevice().is_privateuseone()) {
        value = c10::Device(c10::kCPU);  // factories: build on the host view
      }
    } else {
      value = map_tensors(value, [&](const at::Tensor& t) { return views.alias(t); });
    }
  }

  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);

  views.write_back();
  const size_t num_returns = op.schema().returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
    (*stack)[i] = map_results((*stack)[i], [&](const at::Tensor& t) { return views.to_device(t); });
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
}

// The per-operator form of the same fallback: what a vendor writes to route a
// chosen operator to the host explicitly, visible in the dispatch table as a
// PrivateUse1 kernel rather than as the backend fallback.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sub.Tensor", torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
  // PyTorch's default PrivateUse1 kernel for mse_loss (the structured
  // "NonFunctional" composite) calls mse_loss.out with a 0-dim output, which
  // the CPU kernel resizes with a deprecation warning on every call; running
  // the CPU functional kernel directly avoids that.
  m.impl("mse_loss", torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
  for (const auto& [name, reason] : blocklist()) {
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&blocked_operator>());
  }
}

} // namespace at::openreg
