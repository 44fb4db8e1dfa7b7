// skainet::base — UTF-8, read leniently as llama.cpp reads it, so the tokenizers (text) and the
// template engine (chat) split and count text the same way.
//
//   std::string out;
//   base::append_utf8(out, 0x20AC);                    // "€"; above U+10FFFF: U+FFFD
//   for (size_t i = 0; i < s.size();) {
//     const size_t n = base::utf8_sequence_size(s, i);  // 1 to 4
//     uint32_t cp = base::decode_utf8(s, i, n);
//     i += n;
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace skainet::base {

// A sequence is a lead byte followed by the continuation bytes its high bits ask for (overlong forms
// and surrogates pass, as in llama.cpp); any other byte is a sequence of its own that decodes to
// U+FFFD.
inline constexpr uint32_t kReplacementCharacter = 0xFFFD;
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Appends cp as UTF-8; a value above U+10FFFF, which no UTF-8 sequence holds, becomes U+FFFD.
void append_utf8(std::string& out, uint32_t cp);
// Bytes of the sequence that starts at s[i] (i < s.size()): 1 to 4.
size_t utf8_sequence_size(std::string_view s, size_t i) noexcept;
// The code point of the sequence at s[i], n = utf8_sequence_size(s, i) bytes long; U+FFFD for a lone
// byte that is not ASCII and for a value above U+10FFFF.
uint32_t decode_utf8(std::string_view s, size_t i, size_t n) noexcept;

}  // namespace skainet::base
