#pragma once

#include <optional>

#include <c10/core/impl/InlineDeviceGuard.h>
#include <c10/core/impl/InlineStreamGuard.h>

#include "runtime/OpenRegGuardImpl.h"

// Typed RAII guards for the openreg device and stream, as c10/cuda/CUDAGuard.h
// has them for CUDA: the same semantics as c10::DeviceGuard,
// OptionalDeviceGuard and StreamGuard, without their virtual call through the
// guard registry, so kernels and copies use these. Each restores on
// destruction what was current at construction; a device of another type is
// an error.
namespace c10::openreg {

struct OpenRegGuard {
  explicit OpenRegGuard() = delete;
  explicit OpenRegGuard(c10::DeviceIndex device_index) : guard_(device_index) {}
  explicit OpenRegGuard(c10::Device device) : guard_(device) {}
  OpenRegGuard(const OpenRegGuard&) = delete;
  OpenRegGuard& operator=(const OpenRegGuard&) = delete;
  OpenRegGuard(OpenRegGuard&&) = delete;
  OpenRegGuard& operator=(OpenRegGuard&&) = delete;

  void set_device(c10::Device device) {
    guard_.set_device(device);
  }
  void reset_device(c10::Device device) {
    guard_.reset_device(device);
  }
  void set_index(c10::DeviceIndex device_index) {
    guard_.set_index(device_index);
  }
  c10::Device original_device() const {
    return guard_.original_device();
  }
  c10::Device current_device() const {
    return guard_.current_device();
  }

 private:
  c10::impl::InlineDeviceGuard<impl::OpenRegGuardImpl> guard_;
};

// Does nothing until given a device (a factory's optional device argument).
struct OptionalOpenRegGuard {
  explicit OptionalOpenRegGuard() = default;
  explicit OptionalOpenRegGuard(std::optional<c10::Device> device) : guard_(device) {}
  explicit OptionalOpenRegGuard(std::optional<c10::DeviceIndex> device_index) : guard_(device_index) {}
  OptionalOpenRegGuard(const OptionalOpenRegGuard&) = delete;
  OptionalOpenRegGuard& operator=(const OptionalOpenRegGuard&) = delete;
  OptionalOpenRegGuard(OptionalOpenRegGuard&&) = delete;
  OptionalOpenRegGuard& operator=(OptionalOpenRegGuard&&) = delete;

  void set_device(c10::Device device) {
    guard_.set_device(device);
  }
  void reset_device(c10::Device device) {
    guard_.reset_device(device);
  }
  void set_index(c10::DeviceIndex device_index) {
    guard_.set_index(device_index);
  }
  std::optional<c10::Device> original_device() const {
    return guard_.original_device();
  }
  std::optional<c10::Device> current_device() const {
    return guard_.current_device();
  }
  void reset() {
    guard_.reset();
  }

 private:
  c10::impl::InlineOptionalDeviceGuard<impl::OpenRegGuardImpl> guard_;
};

// Makes the stream's device current and the stream current on that device.
struct OpenRegStreamGuard {
  explicit OpenRegStreamGuard() = delete;
  explicit OpenRegStreamGuard(c10::Stream stream) : guard_(stream) {}
  OpenRegStreamGuard(const OpenRegStreamGuard&) = delete;
  OpenRegStreamGuard& operator=(const OpenRegStreamGuard&) = delete;
  OpenRegStreamGuard(OpenRegStreamGuard&&) = delete;
  OpenRegStreamGuard& operator=(OpenRegStreamGuard&&) = delete;

  void reset_stream(c10::Stream stream) {
    guard_.reset_stream(stream);
  }
  OpenRegStream original_stream() const {
    return OpenRegStream(guard_.original_stream());
  }
  OpenRegStream current_stream() const {
    return OpenRegStream(guard_.current_stream());
  }
  c10::Device original_device() const {
    return guard_.original_device();
  }
  c10::Device current_device() const {
    return guard_.current_device();
  }

 private:
  c10::impl::InlineStreamGuard<impl::OpenRegGuardImpl> guard_;
};

}  // namespace c10::openreg
