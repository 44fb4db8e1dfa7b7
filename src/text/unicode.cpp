#include "text/unicode.hpp"

#include <algorithm>
#include <array>

#include "skainet/core/utf8.hpp"

namespace skainet::text::unicode {

Category category(uint32_t cp) noexcept {
  if (cp > base::kMaxCodePoint) return Category::Undefined;
  const CategoryRun* end = kCategoryRuns + kCategoryRunCount;
  const CategoryRun* it =
      std::upper_bound(kCategoryRuns, end, cp, [](uint32_t v, const CategoryRun& r) { return v < r.first; });
  return (it - 1)->category;  // the first run starts at 0
}

bool is_whitespace(uint32_t cp) noexcept {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::vector<uint32_t> decode_lenient(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = base::utf8_sequence_size(s, i);
    out.push_back(base::decode_utf8(s, i, n));
    i += n;
  }
  return out;
}

namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes take U+0100.. in byte order.
bool is_printable_byte(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct ByteTables {
  std::array<uint32_t, 256> to_cp{};
  ByteTables() {
    uint32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) to_cp[b] = is_printable_byte(b) ? b : next++;
  }
};
const ByteTables& byte_tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) noexcept { return byte_tables().to_cp[b]; }

int byte_from_codepoint(uint32_t cp) noexcept {
  if (cp < 256) return is_printable_byte(cp) ? static_cast<int>(cp) : -1;
  if (cp >= 256 + 68) return -1;
  // The (cp - 256)-th byte that is not printable.
  uint32_t k = cp - 256;
  for (unsigned b = 0; b < 256; ++b) {
    if (!is_printable_byte(b) && k-- == 0) return static_cast<int>(b);
  }
  return -1;
}

size_t complete_prefix(std::string_view s) noexcept {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for its lead
    if (b < 0xC0) return n;            // ASCII ends the question
    const size_t need = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

}  // namespace skainet::text::unicode
