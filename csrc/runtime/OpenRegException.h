#pragma once

#include <c10/util/Exception.h>
#include <openreg.h>

// Turns a failed runtime call into a C++ exception (a Python RuntimeError)
// that carries the runtime's own detail: which device, pointer or size.
#define OPENREG_CHECK(EXPR)                                                                                \
  do {                                                                                                     \
    const orError_t openreg_check_err = (EXPR);                                                            \
    TORCH_CHECK(                                                                                           \
        openreg_check_err == orSuccess, "openreg runtime error ", orGetErrorName(openreg_check_err), ": ", \
        orGetLastErrorMessage());                                                                          \
  } while (0)
