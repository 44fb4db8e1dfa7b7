// UTF-8 and code point helpers for the tokenizers (private to src/text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace skainet::text::unicode {

// General category, reduced to its major class (what \p{L}, \p{N}, ... test).
enum class Category : uint8_t { Undefined, Number, Letter, Separator, Mark, Punctuation, Symbol, Control };

struct CategoryRun {
  uint32_t first;
  Category category;
};
extern const CategoryRun kCategoryRuns[];
extern const size_t kCategoryRunCount;

Category category(uint32_t cp) noexcept;
// Unicode White_Space, as llama.cpp's table has it (0x1C..0x1F are not whitespace).
bool is_whitespace(uint32_t cp) noexcept;

// Bytes of the sequence that `lead` starts, judged by its high bits only (continuation bytes count 1),
// the way llama.cpp splits text into symbols.
inline size_t sequence_length(uint8_t lead) noexcept {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Decodes leniently as llama.cpp does (base::decode_utf8): a byte that does not start a well-formed
// sequence becomes U+FFFD and decoding goes on at the next byte. Encoding is base::append_utf8.
std::vector<uint32_t> decode_lenient(std::string_view s);

// GPT-2's byte-level alphabet: each byte maps to a printable code point and back.
uint32_t byte_to_codepoint(uint8_t b) noexcept;
int byte_from_codepoint(uint32_t cp) noexcept;  // -1 when cp is not in the alphabet

// Length of the longest prefix of s that does not end inside an incomplete (but so far valid)
// UTF-8 sequence: what a streaming decoder may emit now.
size_t complete_prefix(std::string_view s) noexcept;

}  // namespace skainet::text::unicode
