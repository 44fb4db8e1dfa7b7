#include "skainet/core/utf8.hpp"

namespace skainet::base {
namespace {

bool continuation(std::string_view s, size_t i) noexcept {
  return i < s.size() && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80;
}
uint32_t payload(std::string_view s, size_t i) noexcept { return static_cast<uint8_t>(s[i]) & 0x3Fu; }

}  // namespace

void append_utf8(std::string& out, uint32_t cp) {
  if (cp > kMaxCodePoint) cp = kReplacementCharacter;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t utf8_sequence_size(std::string_view s, size_t i) noexcept {
  const uint8_t b = static_cast<uint8_t>(s[i]);
  const size_t n = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
  for (size_t k = 1; k < n; ++k)
    if (!continuation(s, i + k)) return 1;
  return n;
}

uint32_t decode_utf8(std::string_view s, size_t i, size_t n) noexcept {
  const uint8_t b = static_cast<uint8_t>(s[i]);
  switch (n) {
    case 2: return ((b & 0x1Fu) << 6) | payload(s, i + 1);
    case 3: return ((b & 0x0Fu) << 12) | (payload(s, i + 1) << 6) | payload(s, i + 2);
    case 4: {
      const uint32_t cp =
          ((b & 0x07u) << 18) | (payload(s, i + 1) << 12) | (payload(s, i + 2) << 6) | payload(s, i + 3);
      return cp > kMaxCodePoint ? kReplacementCharacter : cp;
    }
    default: return b < 0x80 ? b : kReplacementCharacter;
  }
}

}  // namespace skainet::base
