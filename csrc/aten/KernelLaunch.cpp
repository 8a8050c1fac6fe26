#include "aten/KernelLaunch.h"

#include "runtime/OpenRegException.h"
#include "runtime/OpenRegStream.h"

namespace at::openreg {

KernelLaunch::KernelLaunch(c10::Device device, std::string_view name) {
  const c10::openreg::OpenRegStream stream = c10::openreg::getCurrentOpenRegStream(device.index());
  c10::openreg::wait_for_stream(stream);
  OPENREG_CHECK(orKernelBegin(stream.handle(), name.data(), name.size(), &activity_));
}

KernelLaunch::~KernelLaunch() {
  // Only a recorded kernel has anything to end; ending one never fails (it
  // stamps and stores the record).
  if (activity_ != nullptr) {
    (void)orKernelEnd(activity_);
  }
}

}  // namespace at::openreg
