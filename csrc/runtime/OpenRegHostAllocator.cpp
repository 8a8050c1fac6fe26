#include "runtime/OpenRegHostAllocator.h"

#include <cstdio>

#include "runtime/OpenRegException.h"

namespace c10::openreg {
namespace {

void free_host_memory(void* ptr) {
  const orError_t err = orFreeHost(ptr);
  if (err != orSuccess) {
    std::fprintf(stderr, "openreg: orFreeHost(%p) failed: %s\n", ptr, orGetLastErrorMessage());
  }
}

struct OpenRegHostAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* ptr = nullptr;
    if (nbytes > 0) {
      OPENREG_CHECK(orMallocHost(&ptr, nbytes));
    }
    return {ptr, ptr, &free_host_memory, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_host_memory;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    OPENREG_CHECK(orMemcpy(dest, src, count, orMemcpyHostToHost));
  }
};

OpenRegHostAllocator g_host_allocator;

} // namespace

c10::Allocator* getHostAllocator() {
  return &g_host_allocator;
}

} // namespace c10::openreg
