// The structure of sparse openreg tensors: constructors, accessors, resizing
// and copies for the COO (SparsePrivateUse1) and compressed CSR/CSC/BSR/BSC
// (SparseCsrPrivateUse1) dispatch keys.
//
// A sparse tensor is a SparseTensorImpl / SparseCsrTensorImpl holding
// ordinary strided tensors (indices, values; compressed and plain indices,
// values), which live on the device like any other openreg tensor. The
// functions registered here are PyTorch's device-generic ones, the very
// functions SparseCPU and SparseCUDA register: they only arrange those
// component tensors, and whatever arithmetic they need runs as openreg
// operators on the components. Everything that computes on a sparse tensor is
// served by the sparse fallback (SparseFallback.cpp).
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_dimI_native.h>
#include <ATen/ops/_dimV_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <ATen/ops/zeros_native.h>
#include <torch/library.h>

#include "aten/DeviceCall.h"
#include "runtime/OpenRegFunctions.h"

namespace at::openreg {
namespace {

// The openreg device an argument names, if it names one.
std::optional<c10::Device> openreg_device_of(const at::Tensor& tensor) {
  return tensor.defined() && tensor.is_privateuseone() ? std::optional(tensor.device()) : std::nullopt;
}

std::optional<c10::Device> openreg_device_of(const std::optional<c10::Device>& device) {
  return device.has_value() && device->is_privateuseone() ? device : std::nullopt;
}

template <typename T>
std::optional<c10::Device> openreg_device_of(const T& /*argument*/) {
  return std::nullopt;
}

// Out-of-tree kernels get no generated device guard. The functions that
// allocate (new component tensors, the empty placeholders every sparse
// TensorImpl starts with) must allocate on the tensor's device, not on the
// current one: this wrapper makes the device of the first openreg Tensor or
// Device argument current (the current device if there is none), as the
// generated CUDA registrations do. These device-generic functions check
// their arguments themselves (a copy_ may take a CPU source, as on CUDA).
template <auto fn>
struct OnArgumentDevice;

template <typename R, typename... Args, R (*fn)(Args...)>
struct OnArgumentDevice<fn> {
  static R call(Args... args) {
    std::optional<c10::Device> device;
    ((device = device ? device : openreg_device_of(args)), ...);
    const DeviceCall device_call(
        "a sparse tensor's structure", device.value_or(c10::openreg::make_device(c10::openreg::current_device())));
    return fn(std::forward<Args>(args)...);
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(OnArgumentDevice<&at::native::empty_sparse>::call));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(OnArgumentDevice<&at::native::new_with_dims_sparse>::call));
  m.impl(
      "_sparse_coo_tensor_with_dims_and_tensors",
      TORCH_FN(OnArgumentDevice<&at::native::new_with_dims_and_tensor_sparse_symint>::call));
  m.impl("empty_like", TORCH_FN(OnArgumentDevice<&at::native::empty_like_sparse_coo>::call));
  m.impl("zeros.out", TORCH_FN(OnArgumentDevice<&at::native::zeros_sparse_out>::call));
  m.impl("sparse_resize_", TORCH_FN(OnArgumentDevice<&at::native::sparse_resize_>::call));
  m.impl("sparse_resize_and_clear_", TORCH_FN(OnArgumentDevice<&at::native::sparse_resize_and_clear_>::call));
  m.impl("resize_as_sparse_", TORCH_FN(OnArgumentDevice<&at::native::resize_as_sparse_>::call));
  m.impl("zero_", TORCH_FN(OnArgumentDevice<&at::native::zero_sparse_>::call));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(OnArgumentDevice<&at::native::copy_sparse_>::call));
  m.impl("copy_", TORCH_FN(OnArgumentDevice<&at::native::copy_sparse_wrapper_>::call));
  m.impl("clone", TORCH_FN(OnArgumentDevice<&at::native::clone_sparse>::call));

  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_dimI", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("_dimV", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
}

// The compressed constructors (sparse_csr_tensor, _sparse_compressed_tensor_unsafe,
// ...) are composites that already build a SparseCsrPrivateUse1 tensor.
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(OnArgumentDevice<&at::native::empty_sparse_compressed>::call));
  m.impl("empty_like", TORCH_FN(OnArgumentDevice<&at::native::empty_like_sparse_csr>::call));
  m.impl("resize_", TORCH_FN(OnArgumentDevice<&at::native::resize_sparse_csr_>::call));
  m.impl("resize_as_sparse_", TORCH_FN(OnArgumentDevice<&at::native::resize_as_sparse_compressed_>::call));
  m.impl("zero_", TORCH_FN(OnArgumentDevice<&at::native::zero_sparse_csr_>::call));
  m.impl("copy_", TORCH_FN(OnArgumentDevice<&at::native::copy_sparse_compressed_>::call));
  m.impl("clone", TORCH_FN(OnArgumentDevice<&at::native::clone_sparse_compressed>::call));

  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
}

}  // namespace at::openreg
