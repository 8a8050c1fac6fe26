// The weights of an AOTInductor model on openreg: aoti_torch_openreg_device_constant,
// declared by torch_openreg/aoti/openreg.h.
//
// AOTInductor's runtime (torch/csrc/inductor/aoti_runtime/model_base.h, a
// header compiled into every model) allocates a model's constants itself and
// knows device memory only for CUDA, XPU and MPS; for any other device it
// would wrap host memory from malloc in a device tensor. So an openreg model
// keeps its constants where the runtime can: in host memory, as CPU tensors
// (torch_openreg/_inductor/cpp_wrapper.py records them so), and its run()
// reads each through this function, which returns the constant's copy on the
// current openreg device, made at the first run on that device.
//
// The copies hang on the host constant itself (a c10::BackendMeta of its
// TensorImpl, unused on CPU tensors): they live exactly as long as the
// constant, so unloading the model, or replacing its constants
// (load_constants), frees them with it.

#include <torch_openreg/aoti/openreg.h>

#include <mutex>
#include <unordered_map>

#include <ATen/core/Tensor.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>

#include "runtime/OpenRegFunctions.h"

namespace {

struct DeviceCopies final : public c10::BackendMeta {
  // Node-based: the handles given out point at these tensors.
  std::unordered_map<c10::DeviceIndex, at::Tensor> by_device;
};

// Two models of one container may start running at once; the first run on a
// device makes the copy, under this lock, and the others find it.
std::mutex copies_mutex;

}  // namespace

AOTITorchError aoti_torch_openreg_device_constant(AtenTensorHandle host_constant, AtenTensorHandle* device_constant) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    const at::Tensor* host = torch::aot_inductor::tensor_handle_to_tensor_pointer(host_constant);
    if (host->device().type() == c10::kPrivateUse1) {  // a constant the caller already put on the device
      *device_constant = host_constant;
      return AOTI_TORCH_SUCCESS;
    }
    TORCH_CHECK(
        host->device().is_cpu(), "openreg: an AOTInductor model's constant is on ", host->device(),
        "; openreg models keep their constants in host memory or on openreg");
    const c10::Device device(c10::kPrivateUse1, c10::openreg::current_device());
    c10::TensorImpl* impl = host->unsafeGetTensorImpl();
    std::lock_guard<std::mutex> lock(copies_mutex);
    auto* copies = dynamic_cast<DeviceCopies*>(impl->get_backend_meta());
    if (copies == nullptr) {
      TORCH_CHECK(
          impl->get_backend_meta() == nullptr,
          "openreg: an AOTInductor model's constant carries backend metadata of another kind");
      impl->set_backend_meta(c10::make_intrusive<DeviceCopies>());
      copies = static_cast<DeviceCopies*>(impl->get_backend_meta());
    }
    at::Tensor& copy = copies->by_device[device.index()];
    if (!copy.defined()) {
      copy = host->to(device);  // same sizes and strides: a constant is dense
    }
    *device_constant = torch::aot_inductor::tensor_pointer_to_tensor_handle(&copy);
  });
}
