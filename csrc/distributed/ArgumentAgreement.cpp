#include "distributed/ArgumentAgreement.h"

#include <algorithm>
#include <array>
#include <sstream>
#include <string_view>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "distributed/ProcessGroupOpenReg.h"

namespace c10d::openreg {

namespace {

// Words exchanged per rank: fingerprint, signature length, whether the rank
// refused its arguments (CallSignature::refuse), and as much of the signature
// as fits (for the error message). The first kCompared words must be equal on
// every rank.
constexpr int64_t kRecord = 32;
constexpr int64_t kCompared = 3;
// Signature tensor entries: a marker, the dtype, and for tensors whose shape
// must agree, the memory format (kAnyFormat for a tensor gloo copies), the
// dimension count and sizes.
constexpr int64_t kSameShape = -1;
constexpr int64_t kSameDtype = -2;
constexpr int64_t kAnyFormat = -1;

// The options a signature may carry, exchanged as their index here.
constexpr std::array<std::string_view, 2> kOptionNames = {"root", "reduce_op"};

// 64-bit FNV-1a over the signature's words.
int64_t fingerprint(const std::vector<int64_t>& words) {
  uint64_t hash = 14695981039346656037ull;
  for (int64_t word : words) {
    for (int byte = 0; byte < 8; ++byte) {
      hash = (hash ^ ((static_cast<uint64_t>(word) >> (8 * byte)) & 0xff)) * 1099511628211ull;
    }
  }
  return static_cast<int64_t>(hash);
}

}  // namespace

CallSignature::CallSignature(const char* op, OpType type) : op_(op) {
  words_.push_back(static_cast<int64_t>(type));
}

void CallSignature::option(const char* name, int64_t value) {
  const auto known = std::find(kOptionNames.begin(), kOptionNames.end(), name);
  TORCH_INTERNAL_ASSERT(known != kOptionNames.end(), "unknown collective option ", name);
  words_.push_back(known - kOptionNames.begin());
  words_.push_back(value);
}

void CallSignature::same_shape(const at::Tensor& tensor, std::optional<at::MemoryFormat> format) {
  words_.push_back(kSameShape);
  words_.push_back(static_cast<int64_t>(tensor.scalar_type()));
  words_.push_back(format ? static_cast<int64_t>(*format) : kAnyFormat);
  words_.push_back(tensor.dim());
  words_.insert(words_.end(), tensor.sizes().begin(), tensor.sizes().end());
}

void CallSignature::refuse() {
  refused_ = true;
}

void CallSignature::same_dtype(const at::Tensor& tensor) {
  words_.push_back(kSameDtype);
  words_.push_back(static_cast<int64_t>(tensor.scalar_type()));
}

void CallSignature::agree(Backend& gloo, const PeerProcesses& peers, c10::Device device) const {
  const int size = gloo.getSize();
  if (size == 1) {
    return;  // one rank: nothing to agree on
  }
  at::Tensor mine = at::zeros({kRecord}, at::kLong);
  int64_t* record = mine.data_ptr<int64_t>();
  record[0] = fingerprint(words_);
  record[1] = static_cast<int64_t>(words_.size());
  record[2] = refused_ ? 1 : 0;
  std::copy_n(words_.begin(), std::min<size_t>(words_.size(), kRecord - kCompared), record + kCompared);
  at::Tensor all = at::empty({size * kRecord}, at::kLong);
  try {
    gloo._allgather_base(all, mine, AllgatherOptions())->wait();
  } catch (...) {
    rethrow_with(peers.failure(op_, gloo.getRank(), device));
  }
  const int64_t* records = all.const_data_ptr<int64_t>();
  bool agreed = true;
  for (int r = 0; r < size; ++r) {
    agreed = agreed && std::equal(records, records + kCompared, records + r * kRecord);
  }
  if (!agreed) {
    std::string ranks;
    for (int r = 0; r < size; ++r) {
      const int64_t* record = records + r * kRecord;
      ranks +=
          c10::str(r == 0 ? "" : ", ", "rank ", r, ": ", describe(record), record[2] ? " (refused on that rank)" : "");
    }
    TORCH_CHECK_VALUE(
        false, ProcessGroupOpenReg::kName, " ", op_, " on rank ", gloo.getRank(),
        ": the ranks passed different arguments (every rank must pass the same operation, options, and "
        "tensor dtypes and shapes): ",
        ranks);
  }
}

std::string CallSignature::describe(const int64_t* record) const {
  const int64_t length = record[1];
  const int64_t known = std::min<int64_t>(length, kRecord - kCompared);
  const int64_t* words = record + kCompared;
  std::ostringstream text;
  text << opTypeToString(static_cast<OpType>(words[0])) << "(";
  // Options: (name index, value) pairs, before the tensors' negative markers.
  int64_t i = 1;
  while (i + 1 < known && words[i] >= 0 && words[i] < static_cast<int64_t>(kOptionNames.size())) {
    text << (i == 1 ? "" : ", ") << kOptionNames[words[i]] << "=" << words[i + 1];
    i += 2;
  }
  text << ";";
  const char* separator = " ";
  while (i + 1 < known) {
    const bool shape_matters = words[i] == kSameShape;
    text << separator << static_cast<c10::ScalarType>(words[i + 1]);
    i += 2;
    if (shape_matters && i + 1 < known) {
      const int64_t format = words[i++];
      const int64_t dims = words[i++];
      text << "[";
      for (int64_t d = 0; d < dims && i < known; ++d) {
        text << (d == 0 ? "" : ", ") << words[i++];
      }
      text << "]";
      if (format != kAnyFormat && static_cast<at::MemoryFormat>(format) != at::MemoryFormat::Contiguous) {
        text << " " << static_cast<at::MemoryFormat>(format);
      }
    }
    separator = ", ";
  }
  text << (known < length ? " ...)" : ")");
  return text.str();
}

}  // namespace c10d::openreg
