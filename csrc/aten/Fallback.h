#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace at::openreg {

// Calls that ran on the CPU fallback, per operator, since the last reset
// (operators with at least one call, sorted by name).
std::vector<std::pair<std::string, uint64_t>> fallback_stats();
void reset_fallback_stats();

// OPENREG_FALLBACK_OPS=op1,op2 routes the named operators to the fallback even
// where an openreg kernel exists. Called once the extension is loaded, after
// every static registration, so that these registrations are the newest and
// win.
void register_forced_fallbacks();

} // namespace at::openreg
