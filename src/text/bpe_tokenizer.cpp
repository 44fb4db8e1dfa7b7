// Byte-level BPE as llama.cpp runs it: pre-tokenize into words (regexes, GPT-2 byte alphabet), then
// within each word repeatedly merge the adjacent pair with the lowest merge rank (ties: leftmost).
// SPM-style BPE (Gemma 4, Vocab::spm_style) is the same merge loop over raw UTF-8 with spaces already
// written as U+2581; what no merge reaches falls back to "<0xXX>" byte tokens, as in SentencePiece.
#include <cstring>

#include "text/merge_queue.hpp"
#include "text/tokenizer_impl.hpp"

namespace skainet::text {

namespace {

void make_key(std::string& key, std::string_view left, std::string_view right) {
  const uint32_t n = static_cast<uint32_t>(left.size());
  key.assign(reinterpret_cast<const char*>(&n), sizeof n);
  key.append(left);
  key.append(right);
}

}  // namespace

BpeModel::BpeModel(const Vocab& vocab, const TokenMap& map)
    : vocab_(vocab), map_(map), splitter_(vocab.pre, /*byte_encode=*/!vocab.spm_style) {
  ranks_.reserve(vocab.merges.size());
  std::string key;
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string& m = vocab.merges[i];
    // Split at the first space after the first byte (a token may itself be " "), as llama.cpp does;
    // a merge without one pairs "" with "" and can never apply.
    const size_t pos = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    const std::string_view left = pos == std::string::npos ? std::string_view() : std::string_view(m).substr(0, pos);
    const std::string_view right = pos == std::string::npos ? std::string_view() : std::string_view(m).substr(pos + 1);
    make_key(key, left, right);
    ranks_.emplace(key, static_cast<int32_t>(i));  // the first of duplicate merges wins
  }
}

int32_t BpeModel::rank(std::string_view left, std::string_view right, std::string& scratch) const {
  make_key(scratch, left, right);
  auto it = ranks_.find(std::string_view(scratch));
  return it == ranks_.end() ? -1 : it->second;
}

void BpeModel::tokenize_word(const std::string& word, std::vector<int32_t>& out) const {
  const std::string_view text(word);
  // Gemma 4 has tokens for runs of newlines that its merges cannot build (llama.cpp #21343).
  const bool whole = vocab_.ignore_merges || (vocab_.spm_style && text.find_first_not_of('\n') == std::string::npos);
  if (whole) {
    const int32_t id = lookup(map_, text);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::string scratch;
  auto priority = [&](std::string_view left, std::string_view right) -> std::optional<int32_t> {
    const int32_t rk = rank(left, right, scratch);
    if (rk < 0) return std::nullopt;
    return -rk;  // the lowest merge rank goes first
  };
  const std::vector<MergeSymbol> symbols = merge_pairs<int32_t>(text, priority);

  for_each_piece(text, symbols, [&](std::string_view piece) {
    const int32_t id = lookup(map_, piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    // llama.cpp's last resort: byte tokens, "<0xXX>" when SPM-style, else single bytes that happen to
    // be tokens; a byte with neither is dropped.
    for (char c : piece) {
      const int32_t b =
          vocab_.spm_style ? byte_token(map_, static_cast<uint8_t>(c)) : lookup(map_, std::string_view(&c, 1));
      if (b >= 0) out.push_back(b);
    }
  });
}

void BpeModel::tokenize(std::string_view text, std::vector<int32_t>& out) const {
  if (!vocab_.spm_style) {
    for (const std::string& word : splitter_.split(text)) tokenize_word(word, out);
    return;
  }
  std::string escaped;  // only ' ' becomes U+2581 (llama_escape_whitespace); tabs and newlines stay
  escaped.reserve(text.size());
  for (char c : text) {
    if (c == ' ')
      escaped += kSpmSpace;
    else
      escaped += c;
  }
  for (const std::string& word : splitter_.split(escaped)) tokenize_word(word, out);
}

}  // namespace skainet::text
