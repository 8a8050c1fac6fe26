#include "CopyBytes.h"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace openreg::runtime {
namespace {

// Below this, the copy stays in cache and memcpy is fastest; above it, glibc
// itself switches to non-temporal stores.
constexpr size_t kStreamingThreshold = size_t{4} << 20;

// A destination up to half a page ahead of the source (modulo the page)
// aliases; further ahead, loads run far enough in front of the stores.
constexpr uintptr_t kPage = 4096;
constexpr uintptr_t kAliasingWindow = kPage / 2;

bool overlaps(const void* dst, const void* src, size_t count) {
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  return d < s + count && s < d + count;
}

bool aliases(const void* dst, const void* src) {
  const uintptr_t ahead = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & (kPage - 1);
  return ahead != 0 && ahead < kAliasingWindow;
}

#if defined(__SSE2__)
// Backwards, so that every load is below the stores still in flight.
void streamBackward(unsigned char* dst, const unsigned char* src, size_t count) {
  // Non-temporal stores need 16-byte aligned destinations: copy the unaligned
  // head and the tail that does not fill a 64-byte step with memcpy.
  const size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
  const size_t body = (count - head) & ~size_t{63};
  const size_t tail = count - head - body;
  std::memcpy(dst + head + body, src + head + body, tail);
  unsigned char* d = dst + head;
  const unsigned char* s = src + head;
  for (size_t i = body; i != 0;) {
    i -= 64;
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), x0);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), x1);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), x2);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), x3);
  }
  // Non-temporal stores are weakly ordered: make them visible before the copy
  // is reported complete.
  _mm_sfence();
  std::memcpy(dst, src, head);
}
#endif

}  // namespace

void copyBytes(void* dst, const void* src, size_t count) {
  if (overlaps(dst, src, count)) {
    std::memmove(dst, src, count);
    return;
  }
#if defined(__SSE2__)
  if (count >= kStreamingThreshold && aliases(dst, src)) {
    streamBackward(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), count);
    return;
  }
#endif
  std::memcpy(dst, src, count);
}

}  // namespace openreg::runtime
