#include "runtime/OpenRegTensorMeta.h"

#include <string>
#include <unordered_map>

#include <torch/csrc/jit/serialization/pickler_helper.h>

namespace c10::openreg {
namespace {

struct OpenRegTensorMeta final : public c10::BackendMeta {
  explicit OpenRegTensorMeta(int64_t tag) : tag(tag) {}

  c10::intrusive_ptr<c10::BackendMeta> clone(
      const c10::intrusive_ptr<c10::BackendMeta>& /*ptr*/) const override {
    return c10::make_intrusive<OpenRegTensorMeta>(tag);
  }

  int64_t tag;
};

// Serialized metadata is a map of string -> bool, so the tag is written as
// the name of one key.
constexpr std::string_view kTagKey = "openreg_tag=";

void serialize(const at::Tensor& tensor, std::unordered_map<std::string, bool>& metadata) {
  const int64_t tag = get_tensor_tag(tensor);
  if (tag != 0) {
    metadata[std::string(kTagKey) + std::to_string(tag)] = true;
  }
}

void deserialize(const at::Tensor& tensor, std::unordered_map<std::string, bool>& metadata) {
  for (const auto& [key, value] : metadata) {
    if (value && key.rfind(kTagKey, 0) == 0) {
      set_tensor_tag(tensor, std::stoll(key.substr(kTagKey.size())));
    }
  }
}

const bool g_registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &serialize, &deserialize);
  return true;
}();

} // namespace

void set_tensor_tag(const at::Tensor& tensor, int64_t tag) {
  TORCH_CHECK(tensor.is_privateuseone(), "set_tensor_tag expects an openreg tensor, got one on ", tensor.device());
  tensor.unsafeGetTensorImpl()->set_backend_meta(c10::make_intrusive<OpenRegTensorMeta>(tag));
}

int64_t get_tensor_tag(const at::Tensor& tensor) {
  auto* meta = dynamic_cast<OpenRegTensorMeta*>(tensor.unsafeGetTensorImpl()->get_backend_meta());
  return meta == nullptr ? 0 : meta->tag;
}

} // namespace c10::openreg
