#include "runtime/caching/OpenRegOutOfMemory.h"

#include <sstream>
#include <string>

#include <openreg.h>

#include "runtime/caching/OpenRegAllocatorStats.h"

namespace c10::openreg {
namespace {

std::string format_bytes(size_t bytes) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed;
  if (bytes < 1024) {
    os << bytes << " bytes";
  } else if (bytes < (1 << 20)) {
    os << bytes / 1024.0 << " KiB";
  } else if (bytes < (1 << 30)) {
    os << bytes / 1048576.0 << " MiB";
  } else {
    os << bytes / 1073741824.0 << " GiB";
  }
  return os.str();
}

}  // namespace

void raise_out_of_memory(const OutOfMemoryContext& context) {
  const std::string detail = orGetLastErrorMessage();
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  (void)orMemGetInfo(&free_bytes, &total_bytes);
  const auto allocated = static_cast<size_t>(aggregate_allocated(context.stats));
  const auto reserved = static_cast<size_t>(aggregate_reserved(context.stats));
  const bool fraction_set = context.memory_fraction < 1.0;
  std::ostringstream allowed;
  allowed << ",";
  if (fraction_set) {
    allowed << " with " << format_bytes(context.allowed_bytes) << " allowed (set_per_process_memory_fraction("
            << context.memory_fraction << "));";
  }
  const std::string advice = fraction_set && reserved + context.size > context.allowed_bytes
      ? " Raise the per-process memory fraction or free tensors."
      : " Set OPENREG_DEVICE_MEMORY to change the capacity. (" + detail + ")";
  TORCH_CHECK_WITH(
      OutOfMemoryError, false, "openreg out of memory. Tried to allocate ", format_bytes(context.requested),
      ". openreg:", static_cast<int>(context.device), " has a total capacity of ", format_bytes(total_bytes),
      " of which ", format_bytes(free_bytes), " is free. Of the allocated memory ", format_bytes(allocated),
      " is allocated by PyTorch", allowed.str(), " and ", format_bytes(reserved - allocated),
      " is reserved by PyTorch but unallocated.", advice);
}

}  // namespace c10::openreg
