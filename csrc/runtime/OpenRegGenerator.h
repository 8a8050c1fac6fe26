#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace c10::openreg {

// The random number generator of an openreg device. Its state lives in a CPU
// generator (mt19937, the CPU's algorithm), so a seed gives the numbers the
// CPU gives for that seed; host-executed kernels receive that inner generator
// (host_generator), since CPU kernels only accept CPU-typed generators.
// With OPENREG_RANDOM_STREAM=device the inner generator is seeded with a
// scrambled seed instead: a seed then gives numbers of openreg's own, the
// same every run but not the CPU's, as CUDA's Philox streams are not
// (current_seed() is still the seed the program set).
class OpenRegGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit OpenRegGeneratorImpl(c10::DeviceIndex device_index);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  const at::Generator& host_generator() const {
    return host_;
  }

  static c10::DeviceType device_type() {
    return c10::DeviceType::PrivateUse1;
  }

 private:
  OpenRegGeneratorImpl* clone_impl() const override;

  // Seeds host_ with `seed`, scrambled if the device has a stream of its own.
  void seed_host(uint64_t seed);

  // mutable: const accessors still lock its mutex.
  mutable at::Generator host_;
  uint64_t seed_ = c10::default_rng_seed_val;
};

// Per-device default generators (what torch.openreg.manual_seed seeds).
const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index);
at::Generator createGenerator(c10::DeviceIndex device_index);

// The CPU generator that a host-executed kernel for `device` must use in place
// of `generator` (the device's default one if `generator` is empty). Rejects a
// generator of another device type, as CUDA does.
at::Generator host_generator_for(const std::optional<at::Generator>& generator, c10::Device device);

}  // namespace c10::openreg
