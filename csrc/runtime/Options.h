#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <c10/util/ArrayRef.h>

// The backend's OPENREG_* environment variables: the one table that names and
// documents each of them, and the parsers of those the backend reads itself.
// The simulated runtime (third_party/openreg) parses its own three variables,
// since it has no torch; validate_options() asks it whether they are valid.
//
// Nothing here runs when the extension is loaded: an invalid value must not
// break `import torch` for CPU-only code. It fails at first device use (lazy
// init), with a message naming the variable and the value.
namespace c10::openreg {

struct OptionDoc {
  std::string_view name;
  std::string_view default_value;  // empty: unset by default
  std::string_view meaning;
};

// Every OPENREG_* variable read at run time, in the README table's order.
c10::ArrayRef<OptionDoc> option_table();

enum class FallbackMode { ZeroCopy, Copy };

struct FallbackOptions {
  FallbackMode mode;  // OPENREG_FALLBACK_MODE
  bool enabled;  // OPENREG_FALLBACK
  bool warn;  // OPENREG_FALLBACK_WARN
  std::vector<std::string> forced_ops;  // OPENREG_FALLBACK_OPS, without "aten::"
};

// Parsed on the first call; throws on every call if a value is invalid.
const FallbackOptions& fallback_options();

// OPENREG_SANITIZER; throws if the value is invalid.
bool sanitizer_option();

// OPENREG_CUDA_CONTRACT; throws if the value is invalid.
bool cuda_contract_option();

// OPENREG_RANDOM_STREAM; throws if the value is invalid.
enum class RandomStream { Cpu, Device };
RandomStream random_stream_option();

// Throws, naming the first invalid variable and its value, unless every
// variable in option_table() is valid. Called at lazy init.
void validate_options();

}  // namespace c10::openreg
