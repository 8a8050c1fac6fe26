#pragma once

#include <Python.h>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

namespace at::openreg {

// torch_openreg._C._call_on_host(kernel, *args): how the code Inductor
// generates for openreg (torch_openreg/_inductor/wrapper.py) calls each of its
// C++ kernels. See CompiledKernelCall.cpp.
extern PyMethodDef compiled_kernel_call_method;

// The sanitizer's view of compiled kernels (docs/sanitizer.md): while it is on,
// `observer` (a Python callable; None to stop) gets each call's openreg tensor
// arguments before the kernel runs, which writes some of them where no
// operator of the dispatcher sees it. Both ways of calling a kernel
// (_call_on_host, AotiHostAccess.cpp) report through observe_compiled_kernel.
void set_compiled_kernel_observer(PyObject* observer);
void observe_compiled_kernel(const c10::SmallVector<at::Tensor, 8>& openreg_tensors);

}  // namespace at::openreg
