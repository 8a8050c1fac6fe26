#include "runtime/OpenRegHostAllocator.h"

#include <c10/core/Event.h>

#include "runtime/OpenRegCaptureRules.h"
#include "runtime/OpenRegException.h"
#include "runtime/OpenRegStream.h"

namespace c10::openreg {
namespace {

// The runtime-specific parts of PyTorch's caching host allocator: where
// pinned memory comes from, and how stream events are recorded and queried.
struct OpenRegHostAllocatorImpl final : public at::CachingHostAllocatorImpl<c10::Stream, c10::Event> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    // As cudaHostAlloc, which a capture forbids; cached blocks need no call.
    check_capture_allows("a pinned host memory allocation (pin_memory(), pin_memory=True)");
    OPENREG_CHECK(orMallocHost(ptr, size));
  }

  void free_block(at::HostBlock<c10::Stream>* block) override {
    OPENREG_CHECK(orFreeHost(block->ptr_));
  }

  void record_stream(std::optional<std::vector<c10::Event>>& events, c10::Stream stream) override {
    c10::Event event(c10::DeviceType::PrivateUse1);
    event.record(stream);
    events->push_back(std::move(event));
  }

  bool query_event(c10::Event& event) override {
    return event.query();
  }

  c10::Stream get_current_stream() const override {
    return getCurrentOpenRegStream();
  }

  bool stream_is_capturing(c10::Stream stream) const override {
    return c10::openreg::stream_is_capturing(stream);
  }
};

DECLARE_HOST_ALLOCATOR(OpenRegHostAllocator, OpenRegHostAllocatorImpl, free_pinned, g_host_allocator)

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator)

}  // namespace

at::HostAllocator* getHostAllocator() {
  return &g_host_allocator;
}

}  // namespace c10::openreg
