// The host access of openreg's kernels in Inductor's C++ wrapper and in
// AOTInductor models: the C functions torch_openreg/aoti/openreg.h declares.
// The Python wrapper's counterpart is CompiledKernelCall.cpp; both open the
// same scoped access (HostAddresses) around one generated kernel.

#include <torch_openreg/aoti/openreg.h>

#include <memory>

#include <c10/util/SmallVector.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>

#include "aten/HostAddresses.h"
#include "inductor/CompiledKernelCall.h"
#include "sanitizer/SanitizerTrace.h"

namespace {
constexpr std::string_view kOpName = "AOTInductor kernel (Inductor C++ kernel on openreg)";
}  // namespace

struct OpenRegHostAccessOpaque {
  explicit OpenRegHostAccessOpaque(c10::Device device) : device(device), addresses(device, kOpName) {}
  c10::Device device;
  at::openreg::HostAddresses addresses;
};

AOTITorchError aoti_torch_openreg_host_access_begin(
    const AtenTensorHandle* tensors, int64_t count, void** host_addresses, OpenRegHostAccessHandle* access) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    *access = nullptr;
    if (c10::openreg::sanitizer::enabled()) {
      c10::SmallVector<at::Tensor, 8> openreg_tensors;
      for (int64_t i = 0; i < count; ++i) {
        const at::Tensor* tensor = torch::aot_inductor::tensor_handle_to_tensor_pointer(tensors[i]);
        if (tensor->device().type() == c10::kPrivateUse1) {
          openreg_tensors.push_back(*tensor);
        }
      }
      at::openreg::observe_compiled_kernel(openreg_tensors);
    }
    std::unique_ptr<OpenRegHostAccessOpaque> opened;
    for (int64_t i = 0; i < count; ++i) {
      const at::Tensor* tensor = torch::aot_inductor::tensor_handle_to_tensor_pointer(tensors[i]);
      if (tensor->device().type() != c10::kPrivateUse1) {
        // A CPU tensor among an openreg kernel's operands (a scalar, a
        // constant Inductor keeps on the host) is host memory already.
        TORCH_CHECK(
            tensor->device().is_cpu(), "openreg: a compiled kernel got a tensor on ", tensor->device(), " (argument ",
            i, ")");
        host_addresses[i] = tensor->data_ptr();
        continue;
      }
      if (!opened) {
        opened = std::make_unique<OpenRegHostAccessOpaque>(tensor->device());
      }
      TORCH_CHECK(
          tensor->device() == opened->device, "openreg: a compiled kernel got tensors on two devices, ", opened->device,
          " and ", tensor->device(), " (argument ", i, ")");
      host_addresses[i] = opened->addresses.address(*tensor);
    }
    *access = opened.release();
  });
}

AOTITorchError aoti_torch_openreg_host_access_end(OpenRegHostAccessHandle access) {
  delete access;  // closes the accesses: the memory faults from the host again
  return AOTI_TORCH_SUCCESS;
}
