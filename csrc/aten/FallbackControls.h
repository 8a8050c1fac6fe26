#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "aten/OperatorPolicy.h"

namespace at::openreg {

// The fallback's controls and counters, applied to every call that runs on
// the host through it (dense, sparse and nested layouts):
//   OPENREG_FALLBACK=0       strict: raise NotImplementedError naming the
//                            operator instead of running it on the host;
//   OPENREG_FALLBACK_WARN=1  warn once per operator;
// and a count per operator (torch.openreg.fallback_stats()).

// One per operator that ever fell back; never freed, so policies may point at
// them from any thread.
struct FallbackCounter;
FallbackCounter* counter_for(const std::string& name);

// Raises in strict mode.
void check_fallback_enabled(const OperatorPolicy& policy);
// Counts the call; warns the first time if asked to.
void count_fallback_call(const OperatorPolicy& policy);

// Calls that ran on the fallback, per operator, since the last reset
// (operators with at least one call, sorted by name).
std::vector<std::pair<std::string, uint64_t>> fallback_stats();
void reset_fallback_stats();

}  // namespace at::openreg
