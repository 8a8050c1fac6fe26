#include "aten/CpuAllocationsOnDevice.h"

#include <c10/core/CPUAllocator.h>

#include "aten/ScopedHostAccess.h"
#include "aten/CpuAliases.h"

namespace at::openreg {
namespace {

// Whether this thread is inside an AllocateResultsOnDevice scope.
thread_local bool t_in_scope = false;

c10::DeleterFnPtr g_cpu_raw_deleter = nullptr;

// raw_deallocate()'s deleter: device memory taken inside a scope, or CPU memory.
void free_raw(void* ptr) {
  if (!close_addressed_host_access(ptr)) {
    g_cpu_raw_deleter(ptr);
  }
}

class CpuAllocationsOnDevice final : public c10::Allocator {
 public:
  explicit CpuAllocationsOnDevice(c10::Allocator* cpu) : cpu_(cpu) {}

  c10::DataPtr allocate(size_t nbytes) override {
    if (!t_in_scope) {
      return cpu_->allocate(nbytes);
    }
    return address_host_access(device_backed_host_allocator()->allocate(nbytes));
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_raw;
  }

  bool is_simple_data_ptr(const c10::DataPtr& data_ptr) const override {
    return is_addressed_host_access(data_ptr) || cpu_->is_simple_data_ptr(data_ptr);
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    cpu_->copy_data(dest, src, count);  // host memory or host views alike
  }

 private:
  c10::Allocator* cpu_;
};

}  // namespace

void replace_cpu_allocator() {
  // Priority 1: a later registration at the default priority does not
  // displace it; one at a higher priority does, which only brings back the
  // copy.
  static CpuAllocationsOnDevice allocator(c10::GetCPUAllocator());
  g_cpu_raw_deleter = c10::GetCPUAllocator()->raw_deleter();
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

AllocateResultsOnDevice::AllocateResultsOnDevice() : previous_(t_in_scope) {
  t_in_scope = true;
}

AllocateResultsOnDevice::~AllocateResultsOnDevice() {
  t_in_scope = previous_;
}

}  // namespace at::openreg
