// torch.accelerator.Graph for openreg: capture a sequence of operations once,
// replay it many times.
//
// Capture (StreamCapture.h) records the operator calls issued to the capture
// stream. Because openreg operators run on the calling thread, capture also
// executes them (CUDA's capture does not), which does not change what a
// replay computes.
//
// Replay calls each captured operator again with the same arguments (the same
// tensors, so inputs refreshed in place are seen) and writes each fresh result
// into the tensor that capture returned, so the graph's outputs update in
// place, as CUDA graph outputs do. The graph keeps its tensors alive until
// reset(), which plays the part of a private memory pool.
#include <fstream>
#include <memory>
#include <vector>

#include <ATen/core/GraphImplInterface.h>
#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>

#include "graph/StreamCapture.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGuard.h"
#include "runtime/OpenRegMemPool.h"
#include "runtime/OpenRegStream.h"

namespace c10::openreg {
namespace {

class OpenRegGraph final : public at::GraphImplInterface {
 public:
  explicit OpenRegGraph(const at::GraphImplArgs& /*args*/) {}

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode mode) override {
    TORCH_CHECK(!capture_, "This openreg graph is already capturing");
    TORCH_CHECK(calls_.empty(), "This openreg graph already holds a capture; call reset() first");
    const OpenRegStream stream = getCurrentOpenRegStream();
    TORCH_CHECK(
        stream.id() != 0,
        "openreg graphs must be captured on a non-default stream, e.g. "
        "`with torch.openreg.stream(torch.openreg.Stream()), graph:`");
    stream.synchronize();
    stream_ = stream.unwrap();
    pool_ = pool.first != 0 || pool.second != 0 ? pool : new_mempool_id(/*user_created=*/false);
    capture_ = std::make_unique<StreamCapture>(stream_, error_mode(mode));
  }

  void capture_end() override {
    TORCH_CHECK(capture_, "capture_end() without capture_begin() on this openreg graph");
    const std::unique_ptr<StreamCapture> capture = std::move(capture_);
    OpenRegStream(stream_).synchronize();
    capture->check_valid();
    calls_ = capture->take_calls();
  }

  void instantiate() override {
    TORCH_CHECK(!capture_, "Cannot instantiate an openreg graph while it is capturing");
  }

  void replay() override {
    TORCH_CHECK(!capture_, "Cannot replay an openreg graph while it is capturing");
    // Like a CUDA graph launch (cudaGraphLaunch on the current stream of the
    // capture's device), replay is work on the current stream, ordered after
    // what the caller queued there (refreshed inputs).
    const OpenRegGuard device_guard(stream_.device());
    // Autograd recorded its own work during capture; replay only recomputes.
    c10::AutoGradMode no_grad(false);
    for (const CapturedCall& call : calls_) {
      std::vector<c10::IValue> stack = call.inputs;
      call.op.callBoxed(stack);
      for (size_t i = 0; i < stack.size() && i < call.outputs.size(); ++i) {
        write_into(call.outputs[i], stack[i]);
      }
    }
  }

  void reset() override {
    TORCH_CHECK(!capture_, "Cannot reset an openreg graph while it is capturing");
    calls_.clear();
  }

  c10::MempoolId_t pool() const override {
    return pool_;
  }

  void enable_debug_mode() override {
    debug_ = true;
  }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_, "openreg graph: call enable_debug_mode() before capture to use debug_dump()");
    std::ofstream out(path);
    TORCH_CHECK(out, "openreg graph: cannot write ", path);
    out << "digraph openreg_graph {\n";
    for (size_t i = 0; i < calls_.size(); ++i) {
      out << "  n" << i << " [label=\"" << calls_[i].op.operator_name() << "\"];\n";
      if (i > 0) {
        out << "  n" << i - 1 << " -> n" << i << ";\n";
      }
    }
    out << "}\n";
  }

 private:
  // cudaStreamCaptureMode's meaning (OpenRegCaptureRules.h); CUDA's default is global.
  static CaptureErrorMode error_mode(at::GraphCaptureMode mode) {
    switch (mode) {
      case at::GraphCaptureMode::ThreadLocal:
        return CaptureErrorMode::ThreadLocal;
      case at::GraphCaptureMode::Relaxed:
        return CaptureErrorMode::Relaxed;
      case at::GraphCaptureMode::Default:
      case at::GraphCaptureMode::Global:
        break;
    }
    return CaptureErrorMode::Global;
  }

  // Writes a replayed result into the tensor capture returned, unless the
  // operator returned that very tensor (in-place and out= calls).
  static void write_into(const c10::IValue& captured, const c10::IValue& fresh) {
    if (captured.isTensor() && fresh.isTensor()) {
      const at::Tensor& target = captured.toTensor();
      const at::Tensor& source = fresh.toTensor();
      if (target.defined() && source.defined() && target.unsafeGetTensorImpl() != source.unsafeGetTensorImpl()) {
        target.detach().copy_(source);
      }
    } else if (captured.isTensorList() && fresh.isTensorList()) {
      const auto targets = captured.toTensorList();
      const auto sources = fresh.toTensorList();
      for (size_t i = 0; i < targets.size() && i < sources.size(); ++i) {
        write_into(targets.get(i), sources.get(i));
      }
    }
  }

  bool debug_ = false;
  c10::Stream stream_{c10::Stream::DEFAULT, make_device(0)};
  c10::MempoolId_t pool_{0, 0};
  std::unique_ptr<StreamCapture> capture_;  // while capturing
  std::vector<CapturedCall> calls_;  // the finished capture
};

}  // namespace
}  // namespace c10::openreg

namespace at {
// The registry key is the device type's name as PyTorch prints it in upper
// case, which for PrivateUse1 is the backend's registered name.
REGISTER_GRAPH_IMPL(OPENREG, c10::openreg::OpenRegGraph);
}  // namespace at
