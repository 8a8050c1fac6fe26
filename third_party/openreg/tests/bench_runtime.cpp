// Micro-benchmarks of the runtime's hot paths: `make bench`.
// Each figure is the median over many batches, so one-off page faults and
// scheduler noise do not move it.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "openreg.h"

namespace {

using Clock = std::chrono::steady_clock;

// Median nanoseconds per call of op, timed in batches of `batch` calls.
double medianNanoseconds(int batches, int batch, const std::function<void()>& op) {
  std::vector<double> samples;
  for (int b = 0; b < batches; ++b) {
    const auto start = Clock::now();
    for (int i = 0; i < batch; ++i)
      op();
    samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / batch);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

void check(orError_t error) {
  if (error != orSuccess) {
    std::fprintf(stderr, "%s: %s\n", orGetErrorName(error), orGetLastErrorMessage());
    std::exit(1);
  }
}

void mallocFree(size_t size, const char* label) {
  const double ns = medianNanoseconds(200, 100, [size] {
    void* ptr = nullptr;
    check(orMalloc(&ptr, size));
    check(orFree(ptr));
  });
  std::printf("orMalloc+orFree %-28s %10.0f ns\n", label, ns);
}

// Cost of the punch itself on pages that hold data, outside the runtime.
void punchHole(size_t size, const char* label) {
  const int fd = memfd_create("bench", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0)
    std::exit(1);
  char* view = static_cast<char*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  std::vector<double> samples;
  for (int i = 0; i < 2000; ++i) {
    for (size_t page = 0; page < size; page += 4096)
      view[page] = 1;
    const auto start = Clock::now();
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(size));
    samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count());
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  std::printf("punch hole %-33s %10.0f ns\n", label, samples[samples.size() / 2]);
  munmap(view, size);
  close(fd);
}

double gigabytesPerSecond(size_t bytes, const std::function<void()>& copy) {
  copy();  // fault every page in first
  std::vector<double> seconds;
  for (int i = 0; i < 10; ++i) {
    const auto start = Clock::now();
    copy();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + 5, seconds.end());
  return static_cast<double>(bytes) / seconds[5] / 1e9;
}

}  // namespace

int main() {
  mallocFree(1, "1 page, untouched");
  mallocFree(1 << 20, "1 MiB, untouched");
  {
    // Touching is part of the timed loop here: first-touch faults included.
    void* host = nullptr;
    const double ns = medianNanoseconds(200, 10, [&host] {
      void* ptr = nullptr;
      check(orMalloc(&ptr, 1 << 20));
      check(orMemAccessBegin(ptr, 1 << 20, &host));
      for (size_t page = 0; page < (1 << 20); page += 4096)
        static_cast<char*>(host)[page] = 1;
      check(orMemAccessEnd(ptr));
      check(orFree(ptr));
    });
    std::printf("orMalloc+touch+orFree 1 MiB                 %10.0f ns\n", ns);
  }
  punchHole(4096, "1 page, touched");
  punchHole(1 << 20, "1 MiB, touched");

  void* ptr = nullptr;
  check(orMalloc(&ptr, 4096));
  void* host = nullptr;
  const double access = medianNanoseconds(1000, 1000, [ptr, &host] {
    check(orMemAccessBegin(ptr, 4096, &host));
    check(orMemAccessEnd(ptr));
  });
  std::printf("orMemAccessBegin+End                         %10.1f ns\n", access);
  // A small kernel's three operands, in one allocation: three single
  // accesses against one batch.
  const void* operands[] = {ptr, static_cast<char*>(ptr) + 64, static_cast<char*>(ptr) + 128};
  const size_t sizes[] = {64, 64, 64};
  void* hosts[3] = {};
  const double singles = medianNanoseconds(1000, 1000, [&] {
    for (int i = 0; i < 3; ++i)
      check(orMemAccessBegin(operands[i], sizes[i], &hosts[i]));
    for (int i = 0; i < 3; ++i)
      check(orMemAccessEnd(operands[i]));
  });
  std::printf("orMemAccessBegin+End x 3                     %10.1f ns\n", singles);
  const double batch = medianNanoseconds(1000, 1000, [&] {
    check(orMemAccessBeginBatch(3, operands, sizes, hosts));
    check(orMemAccessEndBatch(3, operands));
  });
  std::printf("orMemAccessBeginBatch+EndBatch of 3          %10.1f ns\n", batch);
  // What item() costs the runtime: the wait for an idle stream and the copy
  // of one element.
  float element = 0;
  const double read = medianNanoseconds(1000, 1000, [&] {
    check(orStreamSynchronize(nullptr));
    check(orMemcpy(&element, ptr, sizeof(element), orMemcpyDeviceToHost));
  });
  std::printf("orStreamSynchronize+orMemcpy DtoH 4 bytes    %10.1f ns\n", read);
  check(orFree(ptr));

  const size_t size = size_t{256} << 20;
  std::vector<char> source(size, 1), target(size, 0);
  check(orMalloc(&ptr, size));
  const double runtime =
      gigabytesPerSecond(size, [&] { check(orMemcpy(ptr, source.data(), size, orMemcpyHostToDevice)); });
  const double plain = gigabytesPerSecond(size, [&] { std::memcpy(target.data(), source.data(), size); });
  // The same destination pages as orMemcpy: separates the runtime's overhead
  // from the cost of writing to shared-memory pages.
  check(orMemAccessBegin(ptr, size, &host));
  const double view = gigabytesPerSecond(size, [&] { std::memcpy(host, source.data(), size); });
  check(orMemAccessEnd(ptr));
  std::printf("orMemcpy HtoD 256 MiB                        %10.2f GB/s\n", runtime);
  std::printf("memcpy 256 MiB, host to host                 %10.2f GB/s\n", plain);
  std::printf("memcpy 256 MiB, host to arena host view      %10.2f GB/s\n", view);
  check(orFree(ptr));

  // Round trips through a stream's worker thread (a wake-up each way).
  orStream_t stream = nullptr;
  check(orStreamCreate(&stream));
  const double hostFunc = medianNanoseconds(200, 100, [stream] {
    check(orLaunchHostFunc(stream, [](void*) {}, nullptr));
    check(orStreamSynchronize(stream));
  });
  std::printf("orLaunchHostFunc+orStreamSynchronize, empty  %10.0f ns\n", hostFunc);
  orEvent_t event = nullptr;
  check(orEventCreate(&event));
  const double record = medianNanoseconds(200, 100, [stream, event] {
    check(orEventRecord(event, stream));
    check(orEventSynchronize(event));
  });
  std::printf("orEventRecord+orEventSynchronize, idle       %10.0f ns\n", record);
  const double queries = medianNanoseconds(1000, 1000, [stream, event] {
    check(orStreamQuery(stream));
    check(orEventQuery(event));
  });
  std::printf("orStreamQuery+orEventQuery, idle             %10.1f ns\n", queries);
  check(orMalloc(&ptr, 4096));
  const double async = medianNanoseconds(200, 100, [&] {
    check(orMemcpyAsync(ptr, &element, sizeof(element), orMemcpyHostToDevice, stream));
    check(orStreamSynchronize(stream));
  });
  std::printf("orMemcpyAsync+orStreamSynchronize, 4 bytes   %10.0f ns\n", async);
  check(orFree(ptr));
  check(orEventDestroy(event));
  check(orStreamDestroy(stream));
  return 0;
}
