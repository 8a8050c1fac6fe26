#include "inductor/CompiledKernelCall.h"

#include <optional>

#include <ATen/ops/from_blob.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/HostAddresses.h"
#include "sanitizer/SanitizerTrace.h"

namespace at::openreg {
namespace {

constexpr std::string_view kOpName = "torch.compile kernel (Inductor C++ kernel on openreg)";

PyObject* g_observer = nullptr;  // owned; read and set under the GIL

// Inductor's C++ kernels are plain host code: their Python binding turns each
// tensor argument into `data_ptr()` and the kernel dereferences it. An openreg
// tensor's data_ptr() is a device address, which faults under memory
// protection, so the kernel must get host-view addresses instead. This call
//   1. waits for the work queued on the device's current stream (the kernel
//      runs on the calling thread, in stream order, as every host execution
//      of openreg does: HostAddresses' constructor);
//   2. opens the runtime's scoped host access for each openreg argument's
//      storage and passes the kernel a CPU tensor over the host view at the
//      same offset, sizes and strides (Inductor's binding accepts only
//      tensors for pointer arguments);
//   3. calls the kernel, then releases those CPU tensors and closes the
//      accesses, so memory is reachable from the host exactly for the
//      kernel's duration. Work queued on the stream afterwards runs after it.
// Other arguments (sizes as Python ints, CPU tensors) pass through unchanged.
//
// Raw CPython (vectorcall convention) rather than pybind11: it runs once per
// generated kernel per step, and its cost adds to every compiled step.
PyObject* call_on_host(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_VALUE(nargs >= 1, "_call_on_host(kernel, *args) needs the kernel to call");
  PyObject* kernel = args[0];
  if (c10::openreg::sanitizer::enabled()) {
    c10::SmallVector<at::Tensor, 8> tensors;
    for (Py_ssize_t i = 1; i < nargs; ++i) {
      if (THPVariable_Check(args[i]) && THPVariable_Unpack(args[i]).device().type() == c10::kPrivateUse1) {
        tensors.push_back(THPVariable_Unpack(args[i]));
      }
    }
    observe_compiled_kernel(tensors);
  }
  std::optional<HostAddresses> access;
  c10::Device device(c10::kPrivateUse1);
  // Declared after `access`: the CPU views die before the accesses close.
  pybind11::tuple kernel_args(nargs - 1);
  for (Py_ssize_t i = 1; i < nargs; ++i) {
    PyObject* arg = args[i];
    if (THPVariable_Check(arg)) {
      const at::Tensor& tensor = THPVariable_Unpack(arg);
      if (tensor.device().type() == c10::kPrivateUse1) {
        if (!access) {
          device = tensor.device();
          access.emplace(device, kOpName);
        }
        TORCH_CHECK(
            tensor.device() == device, "openreg: a compiled kernel got tensors on two devices, ", device, " and ",
            tensor.device(), " (argument ", i - 1, ")");
        at::Tensor host_view = at::from_blob(
            access->address(tensor), tensor.sizes(), tensor.strides(), tensor.options().device(c10::kCPU));
        PyTuple_SET_ITEM(kernel_args.ptr(), i - 1, THPVariable_Wrap(std::move(host_view)));
        continue;
      }
    }
    PyTuple_SET_ITEM(kernel_args.ptr(), i - 1, Py_NewRef(arg));
  }
  return PyObject_Call(kernel, kernel_args.ptr(), nullptr);
  END_HANDLE_TH_ERRORS
}

}  // namespace

void set_compiled_kernel_observer(PyObject* observer) {
  Py_XSETREF(g_observer, observer == Py_None ? nullptr : Py_NewRef(observer));
}

void observe_compiled_kernel(const c10::SmallVector<at::Tensor, 8>& openreg_tensors) {
  if (!c10::openreg::sanitizer::enabled()) {
    return;
  }
  const pybind11::gil_scoped_acquire gil;  // an AOTInductor model calls from C++
  if (g_observer == nullptr) {
    return;
  }
  pybind11::list tensors;
  for (const at::Tensor& tensor : openreg_tensors) {
    tensors.append(pybind11::reinterpret_steal<pybind11::object>(THPVariable_Wrap(tensor)));
  }
  pybind11::reinterpret_borrow<pybind11::object>(g_observer)(tensors);
}

PyMethodDef compiled_kernel_call_method = {
    "_call_on_host", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&call_on_host)), METH_FASTCALL,
    "_call_on_host(kernel, *args): calls an Inductor C++ kernel with openreg tensors replaced by host views of "
    "their memory, held for the call, in the current stream's order"};

}  // namespace at::openreg
