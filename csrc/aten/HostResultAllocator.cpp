#include "aten/HostResultAllocator.h"

#include <c10/core/CPUAllocator.h>

#include "aten/HostView.h"

namespace at::openreg {
namespace {

thread_local bool t_results_on_device = false;

class HostResultAllocator final : public c10::Allocator {
 public:
  explicit HostResultAllocator(c10::Allocator* cpu) : cpu_(cpu) {}

  c10::DataPtr allocate(size_t nbytes) override {
    return t_results_on_device ? device_backed_host_allocator()->allocate(nbytes) : cpu_->allocate(nbytes);
  }

  // raw_allocate()/raw_deallocate() serve CPU memory only: raw_allocate
  // asserts that a pointer is its own context, which no device-backed
  // allocation is, so none is ever freed through this deleter.
  c10::DeleterFnPtr raw_deleter() const override {
    return cpu_->raw_deleter();
  }

  bool is_simple_data_ptr(const c10::DataPtr& data_ptr) const override {
    return cpu_->is_simple_data_ptr(data_ptr);
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    cpu_->copy_data(dest, src, count);  // host memory or host views alike
  }

 private:
  c10::Allocator* cpu_;
};

} // namespace

void install_host_result_allocator() {
  // Priority 1: a later registration at the default priority does not
  // displace it; one at a higher priority does, which only brings back the
  // copy.
  static HostResultAllocator allocator(c10::GetCPUAllocator());
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

AllocateResultsOnDevice::AllocateResultsOnDevice() : previous_(t_results_on_device) {
  t_results_on_device = true;
}

AllocateResultsOnDevice::~AllocateResultsOnDevice() {
  t_results_on_device = previous_;
}

} // namespace at::openreg
