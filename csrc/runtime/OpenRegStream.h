#pragma once

#include <functional>
#include <ostream>

#include <c10/core/Stream.h>
#include <openreg.h>

// openreg streams on the PyTorch side, shaped like c10/cuda/CUDAStream.h.
//
// Each device has a default stream (id 0) and a pool of streams per priority
// level, created once and handed out round-robin, as CUDA does; external
// runtime streams can be wrapped too. The current stream is per thread and per
// device. Work queued on a stream (asynchronous copies, event records, waits)
// runs on that stream's runtime worker; operators themselves run on the
// calling thread, after waiting for the current stream (wait_for_stream).
namespace c10::openreg {

class OpenRegStream {
 public:
  // Inline: every kernel launch wraps its current stream.
  explicit OpenRegStream(c10::Stream stream) : stream_(stream) {
    if (C10_UNLIKELY(stream_.device_type() != c10::DeviceType::PrivateUse1)) {
      throw_not_openreg(stream_);
    }
  }

  c10::Stream unwrap() const {
    return stream_;
  }
  operator c10::Stream() const {
    return stream_;
  }
  c10::DeviceIndex device_index() const {
    return stream_.device_index();
  }
  c10::StreamId id() const {
    return stream_.id();
  }
  bool operator==(const OpenRegStream& other) const {
    return stream_ == other.stream_;
  }
  bool operator!=(const OpenRegStream& other) const {
    return stream_ != other.stream_;
  }

  // The three fields that identify a stream, for passing it through code
  // that takes plain integers (e.g. Python bindings), as CUDAStream does.
  c10::StreamData3 pack3() const {
    return stream_.pack3();
  }
  static OpenRegStream unpack3(c10::StreamId stream_id, c10::DeviceIndex device_index, c10::DeviceType device_type) {
    return OpenRegStream(c10::Stream::unpack3(stream_id, device_index, device_type));
  }

  // The runtime handle (nullptr for the default stream, as in the runtime).
  // Inline for the default stream, which every kernel launch on it asks for.
  orStream_t handle() const {
    return id() == 0 ? nullptr : pooled_or_external_handle();
  }
  int priority() const;
  bool query() const;
  void synchronize() const;

 private:
  [[noreturn]] C10_NOINLINE static void throw_not_openreg(c10::Stream stream);
  orStream_t pooled_or_external_handle() const;

  c10::Stream stream_;
};

// Priority levels follow the runtime: 0 (lowest) down to the greatest.
OpenRegStream getDefaultOpenRegStream(c10::DeviceIndex device = -1);
OpenRegStream getCurrentOpenRegStream(c10::DeviceIndex device = -1);
void setCurrentOpenRegStream(OpenRegStream stream);
OpenRegStream getStreamFromPool(int priority, c10::DeviceIndex device = -1);
OpenRegStream getStreamFromPool(bool isHighPriority, c10::DeviceIndex device = -1);
OpenRegStream getStreamFromExternal(orStream_t handle, c10::DeviceIndex device);

// Blocks the calling thread until the work queued on `stream` has run: host-
// executed kernels call it for the current stream before touching memory.
// Cheap when the stream is idle: the runtime returns at once.
inline void wait_for_stream(const OpenRegStream& stream) {
  stream.synchronize();
}

inline std::ostream& operator<<(std::ostream& out, const OpenRegStream& stream) {
  return out << stream.unwrap();
}

}  // namespace c10::openreg

template <>
struct std::hash<c10::openreg::OpenRegStream> {
  size_t operator()(const c10::openreg::OpenRegStream& stream) const noexcept {
    return std::hash<c10::Stream>{}(stream.unwrap());
  }
};
