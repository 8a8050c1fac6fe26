#pragma once

#include <Python.h>

namespace at::openreg {

// torch_openreg._C._call_on_host(kernel, *args): how the code Inductor
// generates for openreg (torch_openreg/_inductor/wrapper.py) calls each of its
// C++ kernels. See CompiledKernelCall.cpp.
extern PyMethodDef compiled_kernel_call_method;

}  // namespace at::openreg
