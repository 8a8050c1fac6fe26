// OPENREG_FALLBACK_OPS=op1,op2: the named operators run on the fallback even
// where an openreg kernel exists, to tell a kernel's bug from the CPU's
// behaviour. Registered at lazy init (first device use) rather than when the
// extension loads, so that a typo never breaks `import torch`; that is also
// after every static registration, so these are the newest and win.
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "aten/Fallback.h"
#include "runtime/Options.h"

namespace at::openreg {

void register_forced_fallbacks() {
  // A failed call registers nothing, so the next device use reports the same
  // error; a successful one is not repeated.
  static std::once_flag registered;
  std::call_once(registered, [] {
    const std::vector<std::string>& ops = c10::openreg::fallback_options().forced_ops;
    for (const std::string& op : ops) {
      const auto dot = op.find('.');
      const c10::OperatorName name("aten::" + op.substr(0, dot), dot == std::string::npos ? "" : op.substr(dot + 1));
      TORCH_CHECK(
          c10::Dispatcher::singleton().findSchema(name).has_value(), "OPENREG_FALLBACK_OPS names '", op,
          "', which is not an aten operator (write e.g. 'add.Tensor' or 'aten::mm')");
    }
    if (ops.empty()) {
      return;
    }
    static torch::Library library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    for (const std::string& op : ops) {
      library.impl(op.c_str(), torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
    }
  });
}

}  // namespace at::openreg
