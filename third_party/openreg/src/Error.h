// Error bookkeeping shared by all API entry points.
#pragma once

#include "openreg.h"

namespace openreg::runtime {

// Records the printf-style message as this thread's last error and returns
// code, so failing paths read `return fail(code, "...", ...);`.
orError_t fail(orError_t code, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace openreg::runtime
