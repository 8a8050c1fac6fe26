#include "runtime/Options.h"

#include <array>
#include <cstdlib>
#include <sstream>
#include <variant>

#include <c10/util/Exception.h>

#include "runtime/OpenRegFunctions.h"

namespace c10::openreg {
namespace {

constexpr std::array<OptionDoc, 10> kOptions{{
    // Parsed by the runtime (third_party/openreg/src/Environment.cpp).
    {"OPENREG_DEVICE_COUNT", "2", "number of devices, 1..16"},
    {"OPENREG_DEVICE_MEMORY", "8G", "capacity of each device, bytes with an optional K/M/G suffix"},
    {"OPENREG_MEMORY_PROTECTION", "1", "1: device memory is unreadable from the host; 0: readable"},
    // Parsed below.
    {"OPENREG_FALLBACK_MODE", "zero_copy",
     "zero_copy: CPU kernels run on device memory; copy: PyTorch's copying cpu_fallback"},
    {"OPENREG_FALLBACK", "1", "0: strict, an operator without an openreg kernel raises"},
    {"OPENREG_FALLBACK_WARN", "0", "1: warn once per operator that runs on the CPU fallback"},
    {"OPENREG_FALLBACK_OPS", "", "comma-separated aten operators to route to the fallback even where a kernel exists"},
    {"OPENREG_SANITIZER", "0", "1: the stream-order sanitizer checks the whole run (docs/sanitizer.md)"},
    {"OPENREG_CUDA_CONTRACT", "1",
     "1: where CUDA and the CPU differ, openreg answers as CUDA (docs/cuda-contract.md); 0: as the CPU"},
    {"OPENREG_RANDOM_STREAM", "cpu",
     "cpu: a seed gives the CPU's random numbers; device: numbers of openreg's own, as a GPU's differ from the CPU's"},
}};

// The variable's value, or its documented default when unset or empty, so the
// table's defaults are the ones in force.
std::string value_of(std::string_view name) {
  for (const OptionDoc& option : kOptions) {
    if (option.name == name) {
      const char* env = std::getenv(option.name.data());
      return env != nullptr && *env != '\0' ? env : std::string(option.default_value);
    }
  }
  TORCH_INTERNAL_ASSERT(false, name, " is not in the options table");
}

void check_one_of(
    std::string_view name, const std::string& value, std::initializer_list<std::string_view> allowed,
    std::string_view expected) {
  for (std::string_view candidate : allowed) {
    if (value == candidate) {
      return;
    }
  }
  TORCH_CHECK(false, name, "='", value, "' is invalid: expected ", expected);
}

bool parse_flag(std::string_view name) {
  const std::string value = value_of(name);
  check_one_of(name, value, {"0", "1"}, "0 or 1");
  return value == "1";
}

// Names are separated by commas and may carry the "aten::" prefix; blanks
// around a name are ignored. Whether each names an operator is checked where
// they are registered (the dispatcher knows).
std::vector<std::string> parse_operator_list(std::string_view name) {
  std::vector<std::string> names;
  std::stringstream list(value_of(name));
  std::string op;
  while (std::getline(list, op, ',')) {
    op.erase(0, op.find_first_not_of(" \t"));
    op.erase(op.find_last_not_of(" \t") + 1);
    if (op.rfind("aten::", 0) == 0) {
      op.erase(0, 6);
    }
    if (!op.empty()) {
      names.push_back(op);
    }
  }
  return names;
}

FallbackOptions parse_fallback_options() {
  const std::string mode = value_of("OPENREG_FALLBACK_MODE");
  check_one_of("OPENREG_FALLBACK_MODE", mode, {"zero_copy", "copy"}, "'zero_copy' (default) or 'copy'");
  return FallbackOptions{
      mode == "copy" ? FallbackMode::Copy : FallbackMode::ZeroCopy,
      parse_flag("OPENREG_FALLBACK"),
      parse_flag("OPENREG_FALLBACK_WARN"),
      parse_operator_list("OPENREG_FALLBACK_OPS"),
  };
}

}  // namespace

c10::ArrayRef<OptionDoc> option_table() {
  return kOptions;
}

const FallbackOptions& fallback_options() {
  // The error is kept rather than rethrown from the initializer, so that every
  // call reports it, not only the first.
  static const std::variant<FallbackOptions, std::string> parsed = []() -> std::variant<FallbackOptions, std::string> {
    try {
      return parse_fallback_options();
    } catch (const c10::Error& error) {
      return error.msg();
    }
  }();
  if (const std::string* error = std::get_if<std::string>(&parsed)) {
    TORCH_CHECK(false, *error);
  }
  return std::get<FallbackOptions>(parsed);
}

bool sanitizer_option() {
  return parse_flag("OPENREG_SANITIZER");
}

bool cuda_contract_option() {
  return parse_flag("OPENREG_CUDA_CONTRACT");
}

RandomStream random_stream_option() {
  const std::string value = value_of("OPENREG_RANDOM_STREAM");
  check_one_of("OPENREG_RANDOM_STREAM", value, {"cpu", "device"}, "'cpu' (default) or 'device'");
  return value == "device" ? RandomStream::Device : RandomStream::Cpu;
}

void validate_options() {
  (void)device_count();  // the runtime's variables
  (void)fallback_options();
  (void)sanitizer_option();
  (void)cuda_contract_option();
  (void)random_stream_option();
}

}  // namespace c10::openreg
