#pragma once

#include <optional>
#include <string>
#include <vector>

#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>

namespace c10 {
class OperatorHandle;
}  // namespace c10

namespace at::openreg {

// Where CUDA's kernels and the CPU's disagree, openreg answers as CUDA:
// openreg's kernels are the CPU's, so without these rules a program that
// fails on a GPU would pass here. The rules are data
// (torch_openreg/openreg/cuda_contract.yaml, each entry with its source in
// CUDA's kernels), registered once at lazy init, before any operator runs:
//   - a dtype CUDA's kernel does not dispatch raises what AT_DISPATCH raises
//     there ("addmm_cuda" not implemented for 'Long');
//   - an operator CUDA has no kernel for raises NotImplementedError;
//   - under torch.use_deterministic_algorithms(True), an operator whose CUDA
//     kernel is nondeterministic alerts through
//     at::globalContext().alertNotDeterministic with CUDA's caller name
//     (RuntimeError, or a warning with warn_only=True).
// Each operator's rule is looked up once, into its OperatorPolicy: calls of
// operators without a rule pay one null check.
struct CudaContractRule;

// When a rule applies, from the call's arguments (names in the schema).
struct RuleCondition {
  enum class Kind {
    Always,
    ArgumentIsNotNone,  // an optional argument is given (bincount's weights)
    ArgumentEquals,  // an int, bool or string argument has `value` (scatter_reduce's reduce="prod")
    ArgumentNotEquals,
    ArgumentIsFloatingOrComplex,  // a tensor argument's dtype (histc)
    // A scan's result dtype: `argument` (a dtype or a tensor) if given, else
    // `input`'s; only for an input with a dimension and an element, the
    // calls that reach CUDA's scan kernel (cumsum).
    ResultIsFloatingOrComplex,
  };
  Kind kind = Kind::Always;
  std::string argument;
  std::string value;  // for (Not)Equals: an integer, true/false or a string
  std::string input;  // for ResultIsFloatingOrComplex
};

struct DtypeRefusal {
  std::string kernel;  // the AT_DISPATCH name in CUDA's kernel
  // The arguments whose promoted dtype the kernel dispatches on (usually one).
  std::vector<std::string> arguments;
  std::vector<c10::ScalarType> dtypes;
  RuleCondition when;
  // CUDA's text where it is not AT_DISPATCH's (an explicit TORCH_CHECK, a
  // RuntimeError): "{dtype}" stands for the dtype.
  std::string message;
  // CUDA's kernel returns before its dtype dispatch when a tensor argument
  // has no elements (matrix products), or when the output has the input's
  // spatial size (upsampling copies the input).
  bool unless_empty = false;
  bool unless_same_size = false;
};

// A dtype CUDA's kernel computes and the CPU's does not (integer histc): the
// host computes the call in `computed_as` and casts the results back.
struct DtypeWidening {
  std::string argument;
  std::vector<c10::ScalarType> dtypes;
  c10::ScalarType computed_as = c10::ScalarType::Double;
};

void add_dtype_refusal(const std::string& op_name, DtypeRefusal refusal);
void add_dtype_widening(const std::string& op_name, DtypeWidening widening);
void add_nondeterministic_alert(const std::string& op_name, const std::string& caller, const RuleCondition& when);
void add_operator_missing_on_cuda(const std::string& op_name);

// The rule of `op`, or nullptr. Resolves argument names against the schema;
// throws if one is not there.
const CudaContractRule* cuda_contract_rule(const c10::OperatorHandle& op);
// The same for a kernel of its own that is not a boxed fallback
// ("aten::convolution_overrideable").
const CudaContractRule* cuda_contract_rule(const char* op_name);

// Raises (or alerts) if the call on `stack` breaks the rule. The arguments
// start at `arguments_begin`.
void check_cuda_contract(const CudaContractRule& rule, const torch::jit::Stack& stack, size_t arguments_begin);

// For a call the rule widens: replaces the tensor arguments of the widened
// dtype on the host stack by copies in the wider one, and returns the dtype
// the results are cast back to; nullopt for every other call.
std::optional<c10::ScalarType> widen_host_arguments(
    const CudaContractRule& rule, torch::jit::Stack& stack, size_t arguments_begin);
// Casts the tensor results (the stack's last `num_returns` values) to `dtype`.
void narrow_host_results(torch::jit::Stack& stack, size_t num_returns, c10::ScalarType dtype);

// OPENREG_CUDA_CONTRACT until set: torch.openreg.cuda_contract.enable() /
// disable(). Off, openreg answers as the CPU does.
void set_cuda_contract_enabled(bool enabled);
bool cuda_contract_enabled();

}  // namespace at::openreg
