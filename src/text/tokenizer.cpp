#include <algorithm>
#include <charconv>

#include "text/tokenizer_impl.hpp"
#include "skainet/core/utf8.hpp"
#include "text/unicode.hpp"

namespace skainet::text {

namespace {

// llama.cpp recognizes special tokens by their text as well as by their type (llama-vocab.cpp,
// "auto-detect special tokens by text"): these become control tokens, so they are neither matched in
// plain text nor printed unless asked, and the first list also ends generation.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "[e~[",
    // fill-in-the-middle pad / repo / file separators
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    "[PAD]",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
};
constexpr std::string_view kControlTexts[] = {
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<\xef\xbd\x9c"
    "fim\xe2\x96\x81"
    "begin\xef\xbd\x9c>",
    "<PRE>",
    "\xe2\x96\x81<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<\xef\xbd\x9c"
    "fim\xe2\x96\x81hole\xef\xbd\x9c>",
    "<SUF>",
    "\xe2\x96\x81<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<\xef\xbd\x9c"
    "fim\xe2\x96\x81"
    "end\xef\xbd\x9c>",
    "<MID>",
    "\xe2\x96\x81<MID>",
    "<|code_middle|>",
    "<|middle|>",
};

// Effective token attributes (llama_token_attr's subset that tokenizing and decoding look at).
enum Attr : uint8_t { kNormal = 1, kControl = 2, kUser = 4, kUnknown = 8, kByte = 16 };

uint8_t attr_of(TokenType t) {
  switch (t) {
    case TokenType::Normal: return kNormal;
    case TokenType::Control: return kControl;
    case TokenType::UserDefined: return kUser;
    case TokenType::Unknown: return kUnknown;
    case TokenType::Byte: return kByte;
    case TokenType::Unused:
    case TokenType::Undefined: break;
  }
  return 0;
}

bool is_c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

struct Fragment {
  int32_t token;  // >= 0: a special token; -1: raw text [offset, offset + length)
  size_t offset, length;
};

// Sorted, merged, empty ones dropped: overlaps() then needs one binary search.
std::vector<TextRange> normalized(std::span<const TextRange> ranges, size_t text_size) {
  std::vector<TextRange> out;
  for (const TextRange& r : ranges) {
    if (r.offset > text_size || r.length > text_size - r.offset) {
      throw InvalidArgument("plain-text range [" + std::to_string(r.offset) + ", +" + std::to_string(r.length) +
                            ") is outside the text of " + std::to_string(text_size) + " bytes");
    }
    if (r.length > 0) out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const TextRange& a, const TextRange& b) { return a.offset < b.offset; });
  size_t kept = 0;
  for (const TextRange& r : out) {
    if (kept > 0 && r.offset <= out[kept - 1].offset + out[kept - 1].length) {
      TextRange& last = out[kept - 1];
      last.length = std::max(last.offset + last.length, r.offset + r.length) - last.offset;
    } else {
      out[kept++] = r;
    }
  }
  out.resize(kept);
  return out;
}

// Whether [at, at + length) shares a byte with one of the (normalized) ranges.
bool overlaps(std::span<const TextRange> ranges, size_t at, size_t length) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), at,
                             [](size_t pos, const TextRange& r) { return pos < r.offset + r.length; });
  return it != ranges.end() && it->offset < at + length;
}

}  // namespace

struct Tokenizer::Impl {
  Vocab vocab;
  TokenMap map;
  std::vector<int32_t> specials;  // matched whole in text before tokenizing; longest first
  std::vector<uint8_t> attrs;     // per id, Attr bits
  std::vector<int32_t> eog;
  std::vector<bool> rstrip;  // per id: drop the whitespace that follows the token in the text
  std::unique_ptr<BpeModel> bpe;

  explicit Impl(Vocab v) : vocab(std::move(v)) {
    const int32_t n = static_cast<int32_t>(vocab.tokens.size());
    map.reserve(vocab.tokens.size());
    for (int32_t i = 0; i < n; ++i) map[vocab.tokens[i]] = i;
    attrs.resize(vocab.tokens.size());
    for (int32_t i = 0; i < n; ++i) attrs[i] = attr_of(vocab.types[i]);

    for (int32_t id : {vocab.eos, vocab.eot, vocab.eom}) {
      if (id >= 0) eog.push_back(id);
    }
    for (std::string_view t : kEogTexts) {
      if (const int32_t id = lookup(map, t); id >= 0) {
        attrs[id] |= kControl;
        eog.push_back(id);
      }
    }
    for (std::string_view t : kControlTexts) {
      if (const int32_t id = lookup(map, t); id >= 0) attrs[id] |= kControl;
    }
    // Where "</s>" is an ordinary word (Gemma 4, PLaMo), llama.cpp turns it back into a normal token.
    const int32_t eos_text = lookup(map, "</s>");
    if (eos_text >= 0 && (lookup(map, "<|tool_response>") >= 0 || lookup(map, "<|plamo:eos|>") >= 0)) {
      attrs[eos_text] = kNormal;
      std::erase(eog, eos_text);
    }
    // o200k_harmony: "<|end|>" ends a message, not the generation, when "<|return|>"/"<|call|>" exist.
    const int32_t end_text = lookup(map, "<|end|>");
    if (end_text >= 0 && ((lookup(map, "<|return|>") >= 0 && lookup(map, "<|call|>") >= 0) ||
                          (lookup(map, "<|calls|>") >= 0 && lookup(map, "<|flush|>") >= 0))) {
      attrs[end_text] = kUser;
      std::erase(eog, end_text);
    }

    for (int32_t i = 0; i < n; ++i) {
      if (attrs[i] & (kControl | kUser | kUnknown)) specials.push_back(i);
    }
    std::stable_sort(specials.begin(), specials.end(),
                     [&](int32_t a, int32_t b) { return vocab.tokens[a].size() > vocab.tokens[b].size(); });

    // Phi-3: special tokens eat the whitespace after them (llama.cpp sets RSTRIP by model name).
    rstrip.assign(vocab.tokens.size(), false);
    if (vocab.model_name.find("phi-3") != std::string::npos || vocab.model_name.find("phi3") != std::string::npos) {
      for (int32_t id : specials) rstrip[id] = true;
      for (std::string_view t : {"</s>"}) {
        if (int32_t id = lookup(map, t); id >= 0) rstrip[id] = true;
      }
      for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) {
        if (int32_t id = lookup(map, t); id >= 0) rstrip[id] = false;
      }
    }
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
    if (vocab.model == VocabModel::Bpe) bpe = std::make_unique<BpeModel>(vocab, map);
  }

  // llama.cpp's tokenizer_st_partition: special tokens, longest first, carve the text into pieces.
  // No control or unknown token is matched where it would share a byte with a `plain` range (these
  // are normalized); the search goes on one byte later, so a real one overlapping it is still found.
  std::vector<Fragment> partition(std::string_view text, bool parse_special,
                                  std::span<const TextRange> plain = {}) const {
    std::vector<Fragment> frags;
    if (text.empty()) return frags;
    frags.push_back({-1, 0, text.size()});
    std::vector<Fragment> next;
    for (int32_t id : specials) {
      const bool control = attrs[id] & (kControl | kUnknown);
      if (!parse_special && control) continue;
      const bool guarded = control && !plain.empty();
      const std::string& s = vocab.tokens[id];
      next.clear();
      bool changed = false;
      for (const Fragment& f : frags) {
        if (f.token >= 0) {
          next.push_back(f);
          continue;
        }
        size_t at = f.offset, from = f.offset;
        const size_t end = f.offset + f.length;
        for (;;) {
          const size_t m = text.substr(0, end).find(s, from);
          if (m == std::string_view::npos) break;
          if (guarded && overlaps(plain, m, s.size())) {
            from = m + 1;
            continue;
          }
          if (m > at) next.push_back({-1, at, m - at});
          next.push_back({id, m, s.size()});
          at = m + s.size();
          if (rstrip[id]) {
            while (at < end && is_c_space(text[at])) ++at;
          }
          from = at;
          changed = true;
        }
        if (at < end) next.push_back({-1, at, end - at});
      }
      if (changed) frags.swap(next);
    }
    return frags;
  }

  std::string piece(int32_t id, bool render_special) const {
    if (id < 0 || id >= static_cast<int32_t>(vocab.tokens.size())) {
      throw InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary of " +
                            std::to_string(vocab.tokens.size()));
    }
    const std::string& text = vocab.tokens[id];
    const uint8_t a = attrs[id];
    if (a & (kControl | kUnknown)) return render_special ? text : std::string();
    if (a & kUser) return text;
    if (a & kNormal) return vocab.model == VocabModel::Spm || vocab.spm_style ? unescape_spm(text) : decode_bytes(text);
    if (a & kByte) return byte_piece(text);
    return {};  // unused / undefined tokens print nothing, as in llama.cpp
  }

  static std::string unescape_spm(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
        out += ' ';
        i += kSpmSpace.size();
      } else {
        out += text[i++];
      }
    }
    return out;
  }

  // GPT-2 alphabet back to bytes; a code point outside it is kept as its UTF-8.
  static std::string decode_bytes(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (uint32_t cp : unicode::decode_lenient(text)) {
      const int b = unicode::byte_from_codepoint(cp);
      if (b >= 0)
        out += static_cast<char>(b);
      else
        base::append_utf8(out, cp);
    }
    return out;
  }

  std::string byte_piece(std::string_view text) const {
    unsigned v = 0;
    if (text.size() == 6 && text.substr(0, 3) == "<0x" && text[5] == '>' &&
        std::from_chars(text.data() + 3, text.data() + 5, v, 16).ptr == text.data() + 5) {
      return std::string(1, static_cast<char>(v));
    }
    return vocab.model == VocabModel::Bpe && !vocab.spm_style ? decode_bytes(text) : std::string(text);
  }

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              std::span<const TextRange> plain = {}) const {
    std::vector<int32_t> out;
    if (add_special && vocab.add_bos && vocab.bos >= 0) out.push_back(vocab.bos);
    bool prev_special = true;  // SPM: the text after a special token (or at the start) gets a space
    std::string buf;
    for (const Fragment& f : partition(text, parse_special, plain)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      const std::string_view raw = text.substr(f.offset, f.length);
      if (vocab.model == VocabModel::Bpe) {
        bpe->tokenize(raw, out);
        continue;
      }
      buf.clear();
      if (vocab.add_space_prefix && prev_special) buf += kSpmSpace;
      for (char c : raw) {
        if (c == ' ')
          buf += kSpmSpace;
        else
          buf += c;
      }
      spm_tokenize(vocab, map, buf, out);
      prev_special = false;
    }
    if (add_special && vocab.add_eos && vocab.eos >= 0) out.push_back(vocab.eos);
    return out;
  }
};

Tokenizer::Tokenizer(Vocab vocab) : impl_(std::make_unique<Impl>(std::move(vocab))) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_file(const std::filesystem::path& gguf_path) {
  try {
    return from_gguf(gguf::read_header(gguf_path));
  } catch (Error& e) {
    e.add_context("tokenizer from " + gguf_path.string());
    throw;
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return impl_->encode(text, add_special, parse_special);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       std::span<const TextRange> plain) const {
  const std::vector<TextRange> ranges = normalized(plain, text.size());
  return impl_->encode(text, add_special, /*parse_special=*/true, ranges);
}

std::optional<SpecialText> Tokenizer::find_special_text(std::string_view text) const {
  for (const Fragment& f : impl_->partition(text, /*parse_special=*/true)) {
    if (f.token >= 0 && (impl_->attrs[f.token] & (kControl | kUnknown))) return SpecialText{f.token, f.offset};
  }
  return std::nullopt;
}

bool Tokenizer::may_join_special_text(std::string_view text) const {
  for (int32_t id : impl_->specials) {
    if (!(impl_->attrs[id] & (kControl | kUnknown))) continue;
    const std::string_view s = impl_->vocab.tokens[id];
    for (size_t k = 1; k < s.size() && k <= text.size(); ++k) {
      if (text.ends_with(s.substr(0, k)) || text.starts_with(s.substr(s.size() - k))) return true;
    }
  }
  return false;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  return impl_->piece(id, render_special);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  std::string out;
  size_t i = 0;
  bool strip = impl_->vocab.add_space_prefix && options.strip_leading_space;
  // Every leading BOS, as StreamDecoder skips them: "<s>" parsed after an added BOS gives two.
  while (strip && i < ids.size() && ids[i] == impl_->vocab.bos) {
    out += impl_->piece(ids[i], options.render_special);
    ++i;
  }
  for (; i < ids.size(); ++i) {
    std::string p = impl_->piece(ids[i], options.render_special);
    if (strip && !p.empty() && p[0] == ' ') p.erase(0, 1);
    strip = false;
    out += p;
  }
  return out;
}

int32_t Tokenizer::vocab_size() const noexcept { return static_cast<int32_t>(impl_->vocab.tokens.size()); }
int32_t Tokenizer::bos() const noexcept { return impl_->vocab.bos; }
int32_t Tokenizer::eos() const noexcept { return impl_->vocab.eos; }
bool Tokenizer::is_eog(int32_t id) const noexcept {
  return id >= 0 && std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}
std::optional<int32_t> Tokenizer::find(std::string_view token_text) const {
  const int32_t id = lookup(impl_->map, token_text);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}
const Vocab& Tokenizer::vocab() const noexcept { return impl_->vocab; }

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(&tokenizer), options_(options) {}

std::string StreamDecoder::push(int32_t id) {
  const bool shown =
      std::find(options_.shown_tokens.begin(), options_.shown_tokens.end(), id) != options_.shown_tokens.end();
  std::string p = tokenizer_->token_to_piece(id, options_.render_special || shown);
  if (first_) {
    const bool leading_bos = id == tokenizer_->bos() && id >= 0;
    if (!leading_bos) {
      if (options_.strip_leading_space && tokenizer_->vocab().add_space_prefix && !p.empty() && p[0] == ' ') {
        p.erase(0, 1);
      }
      first_ = false;
    }
  }
  pending_ += p;
  const size_t n = unicode::complete_prefix(pending_);
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

void StreamDecoder::reset() {
  pending_.clear();
  first_ = true;
}

}  // namespace skainet::text
