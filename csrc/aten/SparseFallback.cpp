// The CPU fallback for sparse openreg tensors: every operator on the
// SparsePrivateUse1 (COO) and SparseCsrPrivateUse1 (CSR/CSC/BSR/BSC) keys
// without an openreg kernel runs its SparseCPU / SparseCsrCPU kernel.
//
// A sparse tensor owns no memory of its own: it is sizes and flags around
// strided component tensors. So the host counterpart of an openreg sparse
// tensor is a CPU sparse tensor of the same layout whose components are the
// HostViews aliases of the device components: the CPU kernel reads and writes
// device memory in place, without copies, as the strided fallback does. After
// the kernel, what it did to a sparse argument (new sizes, replaced or resized
// components, the coalesced flag) is carried back to the openreg tensor, and
// sparse results become openreg sparse tensors whose components are mapped
// back like strided results (over an argument's memory: no copy).
#include "aten/SparseFallback.h"

#include <string>

#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include "aten/DeviceCall.h"
#include "aten/Fallback.h"
#include "aten/IValueTensors.h"
#include "runtime/OpenRegGenerator.h"

namespace at::openreg {
namespace {

bool is_compressed(c10::Layout layout) {
  return layout == c10::kSparseCsr || layout == c10::kSparseCsc || layout == c10::kSparseBsr ||
      layout == c10::kSparseBsc;
}

at::SparseTensorImpl* coo_impl(const at::Tensor& t) {
  return static_cast<at::SparseTensorImpl*>(t.unsafeGetTensorImpl());
}

at::SparseCsrTensorImpl* compressed_impl(const at::Tensor& t) {
  return static_cast<at::SparseCsrTensorImpl*>(t.unsafeGetTensorImpl());
}

// A COO tensor holding exactly these components (no shallow copies, unlike
// _sparse_coo_tensor_unsafe): HostViews tracks the alias tensors themselves, so
// what a kernel does to a component of the CPU tensor is seen on the device.
at::Tensor make_coo(
    c10::DispatchKey key,
    const at::Tensor& like,
    const at::Tensor& indices,
    const at::Tensor& values) {
  at::Tensor t = at::detail::make_tensor<at::SparseTensorImpl>(c10::DispatchKeySet(key), like.dtype());
  at::SparseTensorImpl* impl = coo_impl(t);
  const at::SparseTensorImpl* like_impl = coo_impl(like);
  impl->raw_resize_(like_impl->sparse_dim(), like_impl->dense_dim(), like.sizes());
  impl->set_indices_and_values_unsafe(indices, values);
  // set_indices_and_values_unsafe guesses the flag from nnz.
  impl->set_coalesced(like_impl->coalesced());
  return t;
}

at::Tensor make_compressed(
    c10::DispatchKey key,
    c10::Device device,
    const at::Tensor& like,
    const at::Tensor& compressed_indices,
    const at::Tensor& plain_indices,
    const at::Tensor& values) {
  at::Tensor t = at::detail::make_tensor<at::SparseCsrTensorImpl>(
      c10::DispatchKeySet(key), device, like.layout(), like.dtype());
  compressed_impl(t)->set_member_tensors(compressed_indices, plain_indices, values, like.sizes());
  return t;
}

// The sparse arguments of one fallback call and their CPU counterparts.
class SparseHostViews {
 public:
  explicit SparseHostViews(HostViews& views) : views_(views) {}

  at::Tensor alias(const at::Tensor& device_sparse) {
    for (const auto& entry : entries_) {
      if (entry.device.unsafeGetTensorImpl() == device_sparse.unsafeGetTensorImpl()) {
        return entry.host;
      }
    }
    Entry entry{device_sparse, {}, {}, {}};
    if (device_sparse.layout() == c10::kSparse) {
      const at::SparseTensorImpl* impl = coo_impl(device_sparse);
      entry.device_components = {impl->indices(), impl->values()};
      entry.components = {views_.alias(impl->indices()), views_.alias(impl->values())};
      entry.host = make_coo(c10::DispatchKey::SparseCPU, device_sparse, entry.components[0], entry.components[1]);
    } else {
      const at::SparseCsrTensorImpl* impl = compressed_impl(device_sparse);
      entry.device_components = {impl->compressed_indices(), impl->plain_indices(), impl->values()};
      entry.components = {
          views_.alias(impl->compressed_indices()), views_.alias(impl->plain_indices()), views_.alias(impl->values())};
      entry.host = make_compressed(
          c10::DispatchKey::SparseCsrCPU, c10::Device(c10::kCPU), device_sparse,
          entry.components[0], entry.components[1], entry.components[2]);
    }
    entries_.push_back(entry);
    return entry.host;
  }

  // Carries what the kernel did to sparse arguments back to the device
  // tensors. Runs after HostViews::write_back, which has already carried
  // in-place changes of the components themselves (a resized values tensor).
  void write_back() {
    for (const Entry& entry : entries_) {
      const at::Tensor& host = entry.host;
      const at::Tensor& device = entry.device;
      if (host.layout() == c10::kSparse) {
        const at::SparseTensorImpl* h = coo_impl(host);
        at::SparseTensorImpl* d = coo_impl(device);
        const bool replaced = !same(h->indices(), entry.components[0]) || !same(h->values(), entry.components[1]);
        if (replaced || h->sizes() != d->sizes() || h->sparse_dim() != d->sparse_dim()) {
          d->raw_resize_(h->sparse_dim(), h->dense_dim(), h->sizes());
          d->set_indices_and_values_unsafe(views_.to_device(h->indices()), views_.to_device(h->values()));
        }
        d->set_coalesced(h->coalesced());
      } else {
        const at::SparseCsrTensorImpl* h = compressed_impl(host);
        const bool replaced = !same(h->compressed_indices(), entry.components[0]) ||
            !same(h->plain_indices(), entry.components[1]) || !same(h->values(), entry.components[2]);
        if (replaced || host.sizes() != device.sizes()) {
          compressed_impl(device)->set_member_tensors(
              views_.to_device(h->compressed_indices()),
              views_.to_device(h->plain_indices()),
              views_.to_device(h->values()),
              host.sizes());
        }
      }
    }
  }

  // A result: an argument's counterpart returned as is (in-place, out=) is
  // that argument; anything else is mapped by HostViews (sparse_to_device).
  at::Tensor to_device(const at::Tensor& host_result) {
    if (!host_result.defined()) {
      return host_result;
    }
    for (const auto& entry : entries_) {
      if (entry.host.unsafeGetTensorImpl() == host_result.unsafeGetTensorImpl()) {
        return entry.device;
      }
    }
    return views_.to_device(host_result);
  }

 private:
  static bool same(const at::Tensor& a, const at::Tensor& b) {
    return a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl();
  }

  struct Entry {
    at::Tensor device;
    at::Tensor host;
    // The host aliases of the device components, in the TensorImpl's order.
    c10::SmallVector<at::Tensor, 3> components;
    // The device components themselves, kept alive for HostViews (which
    // borrows them) after write_back may have replaced them in `device`.
    c10::SmallVector<at::Tensor, 3> device_components;
  };

  HostViews& views_;
  c10::SmallVector<Entry, 2> entries_;
};

bool is_optional_generator(const c10::Argument& argument) {
  const c10::TypePtr& type = argument.type();
  return type->kind() == c10::TypeKind::OptionalType &&
      type->containedType(0)->kind() == c10::TypeKind::GeneratorType;
}

std::string operator_name(const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

void sparse_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const std::string name = operator_name(op);
  // The CPU kernel of the key that brought the call here: SparseCPU for
  // SparsePrivateUse1, SparseCsrCPU for SparseCsrPrivateUse1.
  const c10::DispatchKey key = keys.highestPriorityTypeId();
  const c10::DispatchKey cpu_key = c10::toRuntimePerBackendFunctionalityKey(
      c10::toFunctionalityKey(key), c10::BackendComponent::CPUBit);
  // Otherwise the CPU dispatch below would fail naming the CPU's key.
  TORCH_CHECK_NOT_IMPLEMENTED(
      op.hasComputedKernelForDispatchKey(cpu_key),
      "Could not run '",
      name,
      "' with arguments from the '",
      key,
      "' backend (sparse openreg tensors): openreg runs sparse operators with the CPU's ",
      cpu_key,
      " kernels, and the CPU has none for this operator");
  const auto& arguments = op.schema().arguments();
  const size_t arguments_begin = stack->size() - arguments.size();

  DeviceCheck check(name);
  for (size_t i = arguments_begin; i < stack->size(); ++i) {
    const c10::IValue& value = (*stack)[i];
    if (value.isDevice() && value.toDevice().is_privateuseone()) {
      check.see(value.toDevice());
    }
    // A written argument (out=, an in-place self) must be on the device even
    // when it is a 0-dim CPU tensor, as in the strided fallback.
    const c10::AliasInfo* alias = arguments[i - arguments_begin].alias_info();
    if (alias != nullptr && alias->isWrite()) {
      for_each_tensor(value, [&](const at::Tensor& t) { check.check_written(t); });
    } else {
      for_each_tensor(value, [&](const at::Tensor& t) { check.check(t); });
    }
  }
  const DeviceCall call(name, check.device());
  const c10::Device device = call.device();
  count_fallback_call(op);

  // The arguments replaced by host views stay alive here: HostViews borrows
  // the openreg tensors, and the stack may have held their only reference.
  c10::SmallVector<c10::IValue, 8> originals;
  HostViews views(device, name);
  SparseHostViews sparse(views);
  for (size_t i = 0; i < arguments.size(); ++i) {
    c10::IValue& value = (*stack)[arguments_begin + i];
    if (value.isDevice()) {
      if (value.toDevice().is_privateuseone()) {
        value = c10::Device(c10::kCPU);
      }
    } else if ((value.isNone() || value.isGenerator()) && is_optional_generator(arguments[i])) {
      // Random operators draw from the device's generator, never the CPU's.
      value = c10::openreg::host_generator_for(
          value.isNone() ? std::nullopt : std::optional<at::Generator>(value.toGenerator()), device);
    } else if (value.isTensor() || value.isTensorList() || value.isOptionalTensorList()) {
      originals.push_back(std::move(value));
      value = map_tensors(originals.back(), [&](const at::Tensor& t) {
        if (!t.defined() || !t.device().is_privateuseone()) {
          return t;
        }
        at::Tensor host = t.layout() == c10::kStrided ? views.alias(t) : sparse.alias(t);
        // Some CPU kernels save what only the backward pass needs when an
        // input requires grad (_sparse_mm_reduce_impl's arg-max indices).
        // Below autograd this records nothing.
        if (t.requires_grad() && !host.requires_grad()) {
          host.set_requires_grad(true);
        }
        return host;
      });
    }
  }

  op.redispatchBoxed(c10::DispatchKeySet(cpu_key), stack);

  views.write_back();
  sparse.write_back();
  const size_t num_returns = op.schema().returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
    (*stack)[i] = map_tensors((*stack)[i], [&](const at::Tensor& t) { return sparse.to_device(t); });
  }
}

} // namespace

at::Tensor sparse_to_device(HostViews& views, const at::Tensor& host_sparse, std::string_view op_name) {
  const c10::Layout layout = host_sparse.layout();
  if (layout == c10::kSparse) {
    const at::SparseTensorImpl* impl = coo_impl(host_sparse);
    const at::Tensor values = views.to_device(impl->values());
    // The TensorImpl starts with empty components on the current device.
    c10::DeviceGuard guard(values.device());
    return make_coo(c10::DispatchKey::SparsePrivateUse1, host_sparse, views.to_device(impl->indices()), values);
  }
  if (is_compressed(layout)) {
    const at::SparseCsrTensorImpl* impl = compressed_impl(host_sparse);
    const at::Tensor values = views.to_device(impl->values());
    return make_compressed(
        c10::DispatchKey::SparseCsrPrivateUse1,
        values.device(),
        host_sparse,
        views.to_device(impl->compressed_indices()),
        views.to_device(impl->plain_indices()),
        values);
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      false,
      op_name,
      " produced a tensor with layout ",
      layout,
      " on the CPU, which the openreg device cannot hold: openreg supports torch.strided, torch.sparse_coo, "
      "torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr and torch.sparse_bsc tensors");
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

// Operators with a dedicated SparseCPU / SparseCsrCPU kernel for which the
// dispatcher would pick a composite over the backend fallback: a
// CompositeExplicitAutograd kernel (any sparse key), or the functional kernel
// PyTorch generates for a structured operator from its out= variant
// (CompositeExplicitAutogradNonFunctional, which the SparseCsr keys get but
// Sparse ones do not). Those composites are written for strided tensors
// (mm of a CSR tensor would build a CSR result and fail), so these operators
// are routed to the fallback explicitly, which runs the CPU's sparse kernel.
// tests/test_sparse.py checks that no other operator the CPU serves with a
// sparse kernel reaches a composite on openreg. Structural operators among
// them (copy_, clone, empty_like, ...) have kernels in SparseTensors.cpp;
// is_pinned and _pin_memory keep their composites, which treat every non-CPU
// tensor as unpinnable, as for CUDA.
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  for (const char* op : {"abs", "abs_", "deg2rad", "deg2rad_", "deg2rad.out", "isinf", "mv", "nan_to_num",
                         "nan_to_num_", "permute", "rad2deg", "rad2deg_", "rad2deg.out", "sum", "unsqueeze"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
  }
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  // CompositeExplicitAutograd.
  for (const char* op : {"abs", "abs_", "_conj_physical", "conj_physical_", "deg2rad", "deg2rad_", "deg2rad.out",
                         "isinf", "mul.Scalar", "mul_.Scalar", "rad2deg", "rad2deg_", "rad2deg.out", "select.int",
                         "select_copy.int", "sum"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
  }
  // Functional variants of structured operators.
  for (const char* op : {"add.Tensor", "add_.Tensor", "addmm", "asin", "asin_", "asinh", "asinh_", "atan", "atan_",
                         "atanh", "atanh_", "ceil", "ceil_", "erf", "erf_", "erfinv", "erfinv_", "expm1", "expm1_",
                         "floor", "floor_", "frac", "frac_", "isneginf", "isposinf", "log1p", "log1p_", "mm",
                         "mul.Tensor", "mul_.Tensor", "neg", "neg_", "round", "round_", "sgn", "sgn_", "sign",
                         "sign_", "signbit", "sin", "sin_", "sinh", "sinh_", "sqrt", "sqrt_", "sum.dim_IntList",
                         "tan", "tan_", "tanh", "tanh_", "threshold_backward", "trunc", "trunc_"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
  }
}

} // namespace at::openreg
