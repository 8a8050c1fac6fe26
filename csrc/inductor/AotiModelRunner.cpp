// torch._inductor.aoti_load_package for a package compiled for openreg: the
// runner AOTIModelPackageLoader creates for the package's device key
// ("openreg"), registered with RegisterAOTIModelRunner as CUDA's and the
// CPU's are.
//
// A model library holds AOTInductor's runtime, whose device handling
// (model_base.h) knows cpu, cuda, xpu and mps only, so the runner creates the
// model's container as a "cpu" one: its constants stay in host memory (see
// AotiConstants.cpp) and its device index is -1, which openreg's generated
// code reads as the current device. The runner makes its own device current
// around each run, and passes that device's current stream, so the model
// runs where it was loaded (the loader's device_index, or the current device
// at load time), in the caller's stream order.

#include <string>

#include <ATen/core/Tensor.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>

#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGuard.h"
#include "runtime/OpenRegStream.h"

namespace at::openreg {
namespace {

c10::DeviceIndex device_of(const std::string& device_str) {
  const c10::Device device(device_str);
  TORCH_CHECK_VALUE(
      device.type() == c10::kPrivateUse1, "openreg: AOTInductor's openreg runner got the device ", device_str);
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::openreg::current_device();
  c10::openreg::check_device_index(index);
  return index;
}

class OpenRegModelContainerRunner : public torch::inductor::AOTIModelContainerRunner {
 public:
  OpenRegModelContainerRunner(
      const std::string& model_so_path, size_t num_models, const std::string& device_str, const std::string& cubin_dir,
      bool run_single_threaded)
      : AOTIModelContainerRunner(model_so_path, num_models, "cpu", cubin_dir, run_single_threaded),
        device_(c10::kPrivateUse1, device_of(device_str)) {}

 protected:
  std::vector<at::Tensor> run_impl(std::vector<AtenTensorHandle>& input_handles, void* stream_handle) override {
    for (size_t i = 0; i < input_handles.size(); ++i) {
      const at::Tensor* input = torch::aot_inductor::tensor_handle_to_tensor_pointer(input_handles[i]);
      TORCH_CHECK_VALUE(
          input->device() == device_, "openreg: an AOTInductor model loaded for ", device_, " got input ", i, " on ",
          input->device(),
          input->device().type() == c10::kPrivateUse1
              ? " (load the package with device_index=" + std::to_string(input->device().index()) +
                  ", or move the inputs to " + device_.str() + ")"
              : std::string(" (move the inputs to ") + device_.str() + ", or run a package compiled for that device)");
    }
    c10::openreg::OpenRegGuard guard(device_);
    if (stream_handle == nullptr) {
      stream_handle = c10::openreg::getCurrentOpenRegStream(device_.index()).handle();
    }
    return AOTIModelContainerRunner::run_impl(input_handles, stream_handle);
  }

 private:
  c10::Device device_;
};

std::unique_ptr<torch::inductor::AOTIModelContainerRunner> create_runner(
    const std::string& model_so_path, size_t num_models, const std::string& device_str, const std::string& bin_dir,
    const bool run_single_threaded) {
  return std::make_unique<OpenRegModelContainerRunner>(
      model_so_path, num_models, device_str, bin_dir, run_single_threaded);
}

const torch::inductor::RegisterAOTIModelRunner register_openreg_runner("openreg", &create_runner);

}  // namespace
}  // namespace at::openreg
