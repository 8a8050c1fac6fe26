#pragma once

#include <string_view>

#include <c10/core/Device.h>
#include <openreg.h>

namespace at::openreg {

// The launch of a host-executed kernel on a device's current stream.
//
// openreg kernels run on the calling thread, not on a stream worker: a kernel
// first waits for the work queued on the current stream (asynchronous copies,
// waits on other streams' events), so it runs in the stream's order. While it
// lives, a KernelLaunch also brackets the kernel for the runtime's activity
// records, under `name` (the operator that runs it), so profilers show it on
// the stream's row, linked to that operator. When no profiler records device
// activity, the bracket costs the runtime one relaxed atomic load.
class KernelLaunch {
 public:
  KernelLaunch(c10::Device device, std::string_view name);
  ~KernelLaunch();
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;

 private:
  orKernelActivity_t activity_ = nullptr;
};

}  // namespace at::openreg
