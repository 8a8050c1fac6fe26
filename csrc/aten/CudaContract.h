#pragma once

#include <optional>
#include <string>
#include <vector>

#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

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
//   - a dtype CUDA's kernel dispatches and the CPU's does not (complex32
//     sin) is computed on the host in a wider one and cast back;
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
    // An FFT's signal sizes, `input`'s sizes in the dims `argument` lists
    // (the last one is `last_dim_size` where the overload has it: the real
    // output of a complex-to-real transform), are not all powers of two.
    SignalSizeNotPowerOfTwo,
  };
  Kind kind = Kind::Always;
  std::string argument;
  std::string value;  // for (Not)Equals: an integer, true/false or a string
  std::string input;  // for ResultIsFloatingOrComplex and SignalSizeNotPowerOfTwo
};

struct DtypeRefusal {
  std::string kernel;  // the AT_DISPATCH name in CUDA's kernel
  // The arguments whose promoted dtype the kernel dispatches on (usually one).
  std::vector<std::string> arguments;
  std::vector<c10::ScalarType> dtypes;
  RuleCondition when;
  // CUDA's text where it is not AT_DISPATCH's (an explicit TORCH_CHECK, a
  // RuntimeError): "{dtype}" stands for the dtype, "{signal_size}" for an
  // FFT's signal sizes.
  std::string message;
  // CUDA's kernel returns before its dtype dispatch when a tensor argument
  // has no elements (matrix products), or when the output has the input's
  // spatial size (upsampling copies the input).
  bool unless_empty = false;
  bool unless_same_size = false;
};

// A dtype CUDA's kernel computes and the CPU's does not (integer histc,
// complex32 sin, half avg_pool3d): the host computes the call in
// `computed_as` and casts the results back. An operator may have several
// (half and complex32), all keyed on the same argument.
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

// A call the rule widens, on the host: the dtype CUDA computes (`from`)
// and the one the host computes it in (`to`), and the written arguments
// (out=, in-place self) the kernel writes in the wider dtype instead.
struct WidenedCall {
  c10::ScalarType from;
  c10::ScalarType to;
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 1> written;  // the caller's host view, its wider copy
};

// For a call the rule widens: replaces the tensor arguments on the host
// stack whose dtype is `from` (or its real or complex counterpart) by copies
// in the wider one; nullopt for every other call. `written` says, per
// argument, whether the operator writes it.
std::optional<WidenedCall> widen_host_arguments(
    const CudaContractRule& rule, torch::jit::Stack& stack, size_t arguments_begin, c10::ArrayRef<bool> written);
// Writes the wider results back: the written arguments into the caller's
// host views (the stack's results that are those copies become the views
// again), the other tensor results cast back to `from` (or its counterpart).
void narrow_host_results(const WidenedCall& call, torch::jit::Stack& stack, size_t num_returns);

// The dtype a kernel of its own computes a `dtype` result in under `rule`
// (sum's complex32), or Undefined: none, or the contract is off.
c10::ScalarType widened_dtype(const CudaContractRule* rule, c10::ScalarType dtype);

// OPENREG_CUDA_CONTRACT until set: torch.openreg.cuda_contract.enable() /
// disable(). Off, openreg answers as the CPU does.
void set_cuda_contract_enabled(bool enabled);
bool cuda_contract_enabled();

}  // namespace at::openreg
