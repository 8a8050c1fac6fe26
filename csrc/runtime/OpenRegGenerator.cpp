#include "runtime/OpenRegGenerator.h"

#include <deque>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>

#include "runtime/OpenRegFunctions.h"
#include "runtime/Options.h"

namespace c10::openreg {

namespace {

// splitmix64's finalizer: every seed maps to another, well mixed, one.
uint64_t scramble(uint64_t seed) {
  seed += 0x9e3779b97f4a7c15ULL;
  seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ULL;
  seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebULL;
  return seed ^ (seed >> 31);
}

}  // namespace

OpenRegGeneratorImpl::OpenRegGeneratorImpl(c10::DeviceIndex device_index)
    : c10::GeneratorImpl(make_device(device_index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      host_(at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val)) {
  seed_host(c10::default_rng_seed_val);
}

void OpenRegGeneratorImpl::seed_host(uint64_t seed) {
  seed_ = seed;
  host_.set_current_seed(random_stream_option() == RandomStream::Device ? scramble(seed) : seed);
}

// Kernels lock the host generator's mutex while drawing, so every access to
// its state here takes that mutex too.
void OpenRegGeneratorImpl::set_current_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(host_.mutex());
  seed_host(seed);
}

void OpenRegGeneratorImpl::set_offset(uint64_t offset) {
  std::lock_guard<std::mutex> lock(host_.mutex());
  host_.set_offset(offset);
}

uint64_t OpenRegGeneratorImpl::get_offset() const {
  std::lock_guard<std::mutex> lock(host_.mutex());
  return host_.get_offset();
}

uint64_t OpenRegGeneratorImpl::current_seed() const {
  std::lock_guard<std::mutex> lock(host_.mutex());
  // The CPU generator's own seed follows set_state(); a scrambled one is not the program's.
  return random_stream_option() == RandomStream::Device ? seed_ : host_.current_seed();
}

uint64_t OpenRegGeneratorImpl::seed() {
  std::lock_guard<std::mutex> lock(host_.mutex());
  const uint64_t random = c10::detail::getNonDeterministicRandom();
  seed_host(random);
  return random;
}

void OpenRegGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  std::lock_guard<std::mutex> lock(host_.mutex());
  host_.unsafeGetGeneratorImpl()->set_state(new_state);
}

c10::intrusive_ptr<c10::TensorImpl> OpenRegGeneratorImpl::get_state() const {
  std::lock_guard<std::mutex> lock(host_.mutex());
  return host_.unsafeGetGeneratorImpl()->get_state();
}

OpenRegGeneratorImpl* OpenRegGeneratorImpl::clone_impl() const {
  auto* copy = new OpenRegGeneratorImpl(device_.index());
  std::lock_guard<std::mutex> lock(host_.mutex());
  copy->host_ = host_.clone();
  copy->seed_ = seed_;
  return copy;
}

at::Generator createGenerator(c10::DeviceIndex device_index) {
  if (device_index < 0) {
    device_index = current_device();
  }
  check_device_index(device_index);
  return at::make_generator<OpenRegGeneratorImpl>(device_index);
}

const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) {
  static std::once_flag once;
  // A deque never moves its elements, so references handed out stay valid.
  static std::deque<at::Generator> generators;
  std::call_once(once, [] {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      generators.push_back(at::make_generator<OpenRegGeneratorImpl>(i));
    }
  });
  if (device_index < 0) {
    device_index = current_device();
  }
  check_device_index(device_index);
  return generators[device_index];
}

at::Generator host_generator_for(const std::optional<at::Generator>& generator, c10::Device device) {
  if (!generator.has_value() || !generator->defined()) {
    return getDefaultGenerator(device.index()).get<OpenRegGeneratorImpl>()->host_generator();
  }
  TORCH_CHECK(
      generator->device().type() == c10::DeviceType::PrivateUse1,
      "Expected a 'openreg' device type for generator but found '", generator->device().type(), "'");
  return generator->get<OpenRegGeneratorImpl>()->host_generator();
}

}  // namespace c10::openreg
