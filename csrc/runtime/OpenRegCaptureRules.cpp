#include "runtime/OpenRegCaptureRules.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include <c10/util/Exception.h>

#include "runtime/OpenRegStream.h"

namespace c10::openreg {
namespace {

// CUDA's error codes, which torch.AcceleratorError carries.
constexpr int32_t kStreamCaptureUnsupported = 900;  // cudaErrorStreamCaptureUnsupported
constexpr int32_t kStreamCaptureInvalidated = 901;  // cudaErrorStreamCaptureInvalidated

std::mutex g_captures_mutex;
std::vector<CaptureRegistration*> g_captures;

[[noreturn]] void throw_accelerator_error(int32_t code, const std::string& message) {
  throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, code, message);
}

}  // namespace

namespace detail {
std::atomic<int> g_active_captures{0};
}  // namespace detail

CaptureRegistration::CaptureRegistration(c10::Stream stream, CaptureErrorMode mode)
    : stream_(stream), mode_(mode), owner_(std::this_thread::get_id()) {
  std::lock_guard<std::mutex> lock(g_captures_mutex);
  g_captures.push_back(this);
  detail::g_active_captures.fetch_add(1, std::memory_order_relaxed);
}

CaptureRegistration::~CaptureRegistration() {
  std::lock_guard<std::mutex> lock(g_captures_mutex);
  g_captures.erase(std::find(g_captures.begin(), g_captures.end(), this));
  detail::g_active_captures.fetch_sub(1, std::memory_order_relaxed);
}

void CaptureRegistration::check_valid() const {
  if (invalidated_.load(std::memory_order_relaxed)) {
    throw_accelerator_error(
        kStreamCaptureInvalidated,
        "openreg error: operation failed due to a previous error during capture (a call the capture of " +
            c10::str(stream_) + " forbids was made; the graph holds nothing)");
  }
}

bool CaptureRegistration::forbids_synchronizing_call() const {
  switch (mode_) {
    case CaptureErrorMode::Global:
      return true;
    case CaptureErrorMode::ThreadLocal:
      if (owner_ == std::this_thread::get_id()) {
        return true;
      }
      break;
    case CaptureErrorMode::Relaxed:
      break;
  }
  // In every mode: waiting for the capturing stream itself, which is never
  // going to run what it captures.
  return getCurrentOpenRegStream(stream_.device_index()).unwrap() == stream_;
}

bool stream_is_capturing(c10::Stream stream) {
  if (detail::g_active_captures.load(std::memory_order_relaxed) == 0) {
    return false;
  }
  std::lock_guard<std::mutex> lock(g_captures_mutex);
  return std::any_of(g_captures.begin(), g_captures.end(), [&](const CaptureRegistration* capture) {
    return capture->stream() == stream;
  });
}

namespace detail {

void refuse_if_capture_forbids(const char* what) {
  std::lock_guard<std::mutex> lock(g_captures_mutex);
  for (CaptureRegistration* capture : g_captures) {
    if (capture->forbids_synchronizing_call()) {
      capture->invalidate();
      throw_accelerator_error(
          kStreamCaptureUnsupported,
          std::string("openreg error: operation not permitted when stream is capturing (") + what +
              " while a graph captures " + c10::str(capture->stream()) +
              "; the capture is invalidated). Move the call out of the capture, or capture with "
              "capture_error_mode=\"relaxed\" if it runs on another thread and stream.");
    }
  }
}

}  // namespace detail

void check_capture_allows_host_copy(c10::DeviceIndex device, bool pinned, bool non_blocking) {
  const c10::Stream current = getCurrentOpenRegStream(device).unwrap();
  if (!stream_is_capturing(current)) {
    return;
  }
  // ATen's CUDA copy refuses it before the copy starts: nothing to invalidate.
  TORCH_CHECK(
      pinned,
      "Cannot copy between CPU and openreg tensors during openreg graph capture unless the CPU tensor is pinned "
      "(capturing ",
      current, ")");
  // A pinned copy is captured if asynchronous; a synchronous one waits.
  if (!non_blocking) {
    detail::refuse_if_capture_forbids("a synchronous copy between openreg and pinned host memory");
  }
}
}  // namespace c10::openreg
