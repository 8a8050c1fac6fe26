// Backend-private metadata on an openreg tensor: a c10::BackendMeta, the
// place real backends keep per-tensor state such as an internal storage
// format. PyTorch reads and writes it only through the two hooks registered
// with TensorBackendMetaRegistry, in its own form, a map of names to bools:
// torch._utils.get_tensor_metadata / set_tensor_metadata, torch.save (the map
// is pickled with the tensor) and torch.load (it is handed back to the
// rebuilt tensor; weights_only loading included). No header: nothing else in
// the backend reads it.
#include <map>
#include <string>
#include <unordered_map>

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

namespace c10::openreg {
namespace {

struct OpenRegTensorMeta final : public c10::BackendMeta {
  explicit OpenRegTensorMeta(std::map<std::string, bool> entries) : entries(std::move(entries)) {}

  // A shallow copy of the TensorImpl (a view, detach(), a Parameter) gets
  // its own copy of the entries; a new tensor (clone(), empty_like) gets none.
  c10::intrusive_ptr<c10::BackendMeta> clone(const c10::intrusive_ptr<c10::BackendMeta>& /*ptr*/) const override {
    return c10::make_intrusive<OpenRegTensorMeta>(entries);
  }

  std::map<std::string, bool> entries;
};

// The getter hook: adds the tensor's entries to `metadata` (which already
// holds PyTorch's own "conj"/"neg" bits).
void get_metadata(const at::Tensor& tensor, std::unordered_map<std::string, bool>& metadata) {
  if (auto* meta = dynamic_cast<OpenRegTensorMeta*>(tensor.unsafeGetTensorImpl()->get_backend_meta())) {
    metadata.insert(meta->entries.begin(), meta->entries.end());
  }
}

// The setter hook: PyTorch has taken its own keys out; every other key is
// the backend's, set on the tensor (added to, or replacing, what it holds).
void set_metadata(const at::Tensor& tensor, std::unordered_map<std::string, bool>& metadata) {
  if (metadata.empty()) {
    return;
  }
  auto* impl = tensor.unsafeGetTensorImpl();
  std::map<std::string, bool> entries;
  if (auto* meta = dynamic_cast<OpenRegTensorMeta*>(impl->get_backend_meta())) {
    entries = meta->entries;
  }
  for (const auto& [key, value] : metadata) {
    entries[key] = value;
  }
  impl->set_backend_meta(c10::make_intrusive<OpenRegTensorMeta>(std::move(entries)));
}

const bool g_registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &get_metadata, &set_metadata);
  return true;
}();

}  // namespace
}  // namespace c10::openreg
