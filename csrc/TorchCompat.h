#pragma once
// What differs between the torch releases this tree compiles against (2.13,
// 2.14, 2.15), in one place. torch's C++ API has no stable ABI: the extension
// is compiled against each release's headers, and where those headers differ
// the code asks one of the names below instead of comparing versions itself.
// To add a release: build against it, and give each compile error a name here
// (docs/releases.md, "Adding a release").
#include <torch/headeronly/version.h>

#define OPENREG_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

static_assert(
    OPENREG_TORCH_AT_LEAST(2, 13) && !OPENREG_TORCH_AT_LEAST(2, 16),
    "torch_openreg supports torch 2.13, 2.14 and 2.15 (tools/environment_torch.py refuses others)");

// 2.14: the caching allocator's trace gained TraceEntry::ANNOTATE (metadata
// attached to a live allocation), which snapshots report as "annotate".
#define OPENREG_TRACE_HAS_ANNOTATE OPENREG_TORCH_AT_LEAST(2, 14)

// 2.14: the CPU's flash attention kernel takes multi-query attention (one
// key/value head) without enable_gqa; sdp_utils_cpp.h's head-count check
// gained the template argument `supports_mqa` for it.
#define OPENREG_CPU_FLASH_TAKES_MQA OPENREG_TORCH_AT_LEAST(2, 14)
