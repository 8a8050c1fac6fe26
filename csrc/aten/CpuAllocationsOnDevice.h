#pragma once

namespace at::openreg {

// Lets a CPU kernel run by the fallback allocate its results in device
// memory, so that the fallback hands them to the device without a copy.
//
// PyTorch has no per-call allocator hook: a CPU kernel allocates through the
// process's CPU allocator. replace_cpu_allocator() puts a forwarding
// allocator in its place, which sends every allocation to the allocator it
// replaced, except on a thread inside an AllocateResultsOnDevice scope: there
// it allocates device memory of the current device and returns the
// runtime's host view of it (a scoped access, open while the CPU storage
// holds it). Other threads, and this one outside the scope, see the CPU's
// allocator unchanged (its statistics, profiling reports and deleters).
//
// Correctness never depends on it: a result in CPU memory (another allocator
// installed later, an allocation on an intra-op worker thread) is copied to
// the device as before (CpuAliases::to_device).
void replace_cpu_allocator();

// Every allocation inside a scope is an addressed host access (ScopedHostAccess.h),
// at the cost of a table update each: a CPU kernel may take its memory with
// raw_allocate() (oneDNN's buffers, gelu's backward on strided gradients),
// which asserts that a DataPtr's context is its address.
class AllocateResultsOnDevice {
 public:
  AllocateResultsOnDevice();
  ~AllocateResultsOnDevice();
  AllocateResultsOnDevice(const AllocateResultsOnDevice&) = delete;
  AllocateResultsOnDevice& operator=(const AllocateResultsOnDevice&) = delete;

 private:
  bool previous_;
};

}  // namespace at::openreg
