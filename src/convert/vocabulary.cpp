// Vocabularies for synthetic models. The built-in one is the smallest SentencePiece-style ("llama")
// vocabulary llama.cpp loads without complaint: it needs the tokens, scores and token types, the
// <unk>/<s>/</s> ids 0/1/2 (its SPM defaults, written out anyway), and the 256 byte tokens
// <0x00>..<0xFF> of type BYTE, which it uses for byte fallback and to find the newline token.
#include <fmt/format.h>

#include "skainet/model/convert.hpp"

namespace skainet::convert {
namespace {

// llama.cpp's llama_token_type values.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;
constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's word boundary

// Pieces after the byte tokens, in a fixed order and without repeats: the boundary, each printable
// ASCII character alone and after a boundary, then lowercase words of growing length, bare and
// after a boundary. Unbounded, so any vocabulary size can be filled.
class PieceSource {
 public:
  std::string next() {
    if (stage_ == 0) {
      stage_ = 1;
      return std::string(kSpace);
    }
    if (stage_ == 1 || stage_ == 2) {
      std::string s = stage_ == 1 ? std::string(1, static_cast<char>(c_)) : std::string(kSpace) + static_cast<char>(c_);
      if (++c_ > 0x7E) {
        c_ = 0x21;
        ++stage_;
      }
      return s;
    }
    // Lowercase words of length len_ counted in base 26; each yields the bare and the boundary form.
    std::string word(len_, 'a');
    uint64_t v = index_;
    for (size_t i = len_; i-- > 0;) {
      word[i] = static_cast<char>('a' + v % 26);
      v /= 26;
    }
    if (with_boundary_) {
      with_boundary_ = false;
      if (++index_ == count_) {
        index_ = 0;
        ++len_;
        count_ *= 26;
      }
      return std::string(kSpace) + word;
    }
    with_boundary_ = true;
    return word;
  }

 private:
  int stage_ = 0;
  int c_ = 0x21;
  size_t len_ = 2;
  uint64_t index_ = 0, count_ = 26 * 26;
  bool with_boundary_ = false;
};

}  // namespace

std::vector<gguf::KeyValue> builtin_vocabulary(uint32_t n_vocab) {
  constexpr uint32_t kMinimum = 3 + 256;
  if (n_vocab < kMinimum)
    throw InvalidArgument(fmt::format(
        "the built-in vocabulary needs at least {} tokens (3 special + 256 bytes); asked for {}", kMinimum, n_vocab));
  std::vector<gguf::Scalar> tokens, scores, types;
  tokens.reserve(n_vocab);
  scores.reserve(n_vocab);
  types.reserve(n_vocab);
  auto add = [&](std::string text, float score, int32_t type) {
    tokens.emplace_back(std::move(text));
    scores.emplace_back(score);
    types.emplace_back(type);
  };
  add("<unk>", 0.0f, kUnknown);
  add("<s>", 0.0f, kControl);
  add("</s>", 0.0f, kControl);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0.0f, kByte);
  PieceSource pieces;
  // Earlier (shorter) pieces score higher, as SentencePiece orders its pieces.
  for (uint32_t i = 0; tokens.size() < n_vocab; ++i) add(pieces.next(), -static_cast<float>(i), kNormal);

  std::vector<gguf::KeyValue> kv;
  kv.push_back({"tokenizer.ggml.model", gguf::Value::string("llama")});
  kv.push_back({"tokenizer.ggml.tokens", gguf::Value::array(gguf::ValueType::String, std::move(tokens))});
  kv.push_back({"tokenizer.ggml.scores", gguf::Value::array(gguf::ValueType::Float32, std::move(scores))});
  kv.push_back({"tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::Int32, std::move(types))});
  kv.push_back({"tokenizer.ggml.unknown_token_id", gguf::Value::u32(0)});
  kv.push_back({"tokenizer.ggml.bos_token_id", gguf::Value::u32(1)});
  kv.push_back({"tokenizer.ggml.eos_token_id", gguf::Value::u32(2)});
  return kv;
}

std::vector<gguf::KeyValue> vocabulary_of(const gguf::Header& h) {
  const gguf::Value* tokens = h.find("tokenizer.ggml.tokens");
  if (tokens == nullptr)
    throw gguf::FormatError(gguf::FormatErrorKind::MissingKey,
                            fmt::format("{}: no vocabulary: key 'tokenizer.ggml.tokens' not found", h.path.string()));
  if (!tokens->is_array() || tokens->element_type != gguf::ValueType::String || tokens->items.empty())
    throw gguf::FormatError(
        gguf::FormatErrorKind::WrongValueType,
        fmt::format("{}: key 'tokenizer.ggml.tokens' is not a non-empty array of strings", h.path.string()));
  std::vector<gguf::KeyValue> kv;
  for (const gguf::KeyValue& entry : h.metadata)
    if (entry.key.starts_with("tokenizer.")) kv.push_back(entry);
  return kv;
}

}  // namespace skainet::convert
