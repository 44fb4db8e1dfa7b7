#include <cctype>
#include <string>

#include "skainet/text/text.hpp"
#include "text/pre_tokenizer.hpp"

namespace skainet::text {

namespace {

constexpr std::string_view kModel = "tokenizer.ggml.model";
constexpr std::string_view kPre = "tokenizer.ggml.pre";
constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
constexpr std::string_view kScores = "tokenizer.ggml.scores";
constexpr std::string_view kTypes = "tokenizer.ggml.token_type";
constexpr std::string_view kMerges = "tokenizer.ggml.merges";

// tokenizer.ggml.model names. "gemma4" is llama.cpp's BPE with its pre-tokenizer fixed by the model
// name (llama.cpp ignores tokenizer.ggml.pre for it).
struct ModelName {
  std::string_view name;
  VocabModel model;
  std::string_view fixed_pre;  // empty: tokenizer.ggml.pre decides
};
constexpr ModelName kModels[] = {
    {"llama", VocabModel::Spm, {}},
    {"gpt2", VocabModel::Bpe, {}},
    {"gemma4", VocabModel::Bpe, "gemma4"},
};

[[noreturn]] void fail(VocabErrorKind kind, std::string_view key, const std::string& what) {
  throw VocabError(kind, std::string(key), std::string(key) + ": " + what);
}

std::string type_name(const gguf::Value& v) {
  if (!v.is_array()) return std::string(gguf::value_type_name(v.type));
  return "array of " + std::string(gguf::value_type_name(v.element_type));
}

const gguf::Value& require(const gguf::Header& h, std::string_view key) {
  const gguf::Value* v = h.find(key);
  if (!v) fail(VocabErrorKind::MissingKey, key, "missing (the vocabulary needs it)");
  return *v;
}

const std::string& string_scalar(const gguf::Value& v, std::string_view key) {
  if (v.is_array() || v.type != gguf::ValueType::String)
    fail(VocabErrorKind::WrongType, key, "expected string, found " + type_name(v));
  return std::get<std::string>(v.scalar);
}

const std::vector<gguf::Scalar>& array_of(const gguf::Value& v, std::string_view key, gguf::ValueType want,
                                          bool numeric) {
  const bool ok =
      v.is_array() && (numeric ? v.element_type != gguf::ValueType::String && v.element_type != gguf::ValueType::Bool
                               : v.element_type == want);
  if (!ok) {
    fail(VocabErrorKind::WrongType, key,
         "expected array of " + std::string(numeric ? "numbers" : gguf::value_type_name(want)) + ", found " +
             type_name(v));
  }
  return v.items;
}

void check_length(std::string_view key, size_t found, size_t tokens) {
  if (found != tokens) {
    fail(VocabErrorKind::LengthMismatch, key,
         std::to_string(found) + " items, but " + std::string(kTokens) + " has " + std::to_string(tokens));
  }
}

std::optional<bool> find_bool(const gguf::Header& h, std::string_view key) {
  const gguf::Value* v = h.find(key);
  if (!v) return std::nullopt;
  if (v->is_array() || v->type != gguf::ValueType::Bool)
    fail(VocabErrorKind::WrongType, key, "expected bool, found " + type_name(*v));
  return std::get<bool>(v->scalar);
}

// llama.cpp keeps the default when a stored id is out of range (e.g. 0xFFFFFFFF meaning "none").
void read_id(const gguf::Header& h, std::string_view key, int32_t& id, size_t n_tokens) {
  if (id >= static_cast<int64_t>(n_tokens)) id = -1;
  const gguf::Value* v = h.find(key);
  if (!v) return;
  if (v->is_array()) fail(VocabErrorKind::WrongType, key, "expected an integer, found " + type_name(*v));
  const std::optional<int64_t> x = gguf::as_int(v->scalar);
  if (!x) fail(VocabErrorKind::WrongType, key, "expected an integer, found " + type_name(*v));
  if (*x >= 0 && *x < static_cast<int64_t>(n_tokens)) id = static_cast<int32_t>(*x);
}

}  // namespace

std::string_view error_kind_name(VocabErrorKind k) noexcept {
  switch (k) {
    case VocabErrorKind::MissingKey: return "MissingKey";
    case VocabErrorKind::WrongType: return "WrongType";
    case VocabErrorKind::LengthMismatch: return "LengthMismatch";
    case VocabErrorKind::Empty: return "Empty";
    case VocabErrorKind::UnknownModel: return "UnknownModel";
    case VocabErrorKind::UnknownPreTokenizer: return "UnknownPreTokenizer";
  }
  return "?";
}

Vocab Vocab::from_gguf(const gguf::Header& h) {
  Vocab v;
  const std::string& model = string_scalar(require(h, kModel), kModel);
  const ModelName* known = nullptr;
  std::string names;
  for (const ModelName& m : kModels) {
    if (m.name == model) known = &m;
    names += (names.empty() ? "\"" : ", \"") + std::string(m.name) + "\"";
  }
  if (!known) fail(VocabErrorKind::UnknownModel, kModel, "'" + model + "' is not supported (only " + names + ")");
  v.model = known->model;

  const std::vector<gguf::Scalar>& tokens = array_of(require(h, kTokens), kTokens, gguf::ValueType::String, false);
  if (tokens.empty()) fail(VocabErrorKind::Empty, kTokens, "no tokens");
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) fail(VocabErrorKind::LengthMismatch, kTokens, "too many tokens");
  const size_t n = tokens.size();
  v.tokens.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = std::get<std::string>(tokens[i]);
    v.tokens.push_back(t.empty() ? "[EMPTY_" + std::to_string(i) + "]" : t);
  }

  v.scores.assign(n, 0.0f);
  if (const gguf::Value* s = h.find(kScores)) {
    const std::vector<gguf::Scalar>& items = array_of(*s, kScores, gguf::ValueType::Float32, true);
    check_length(kScores, items.size(), n);
    for (size_t i = 0; i < n; ++i) v.scores[i] = static_cast<float>(gguf::as_double(items[i]).value_or(0.0));
  }
  v.types.assign(n, TokenType::Normal);
  if (const gguf::Value* t = h.find(kTypes)) {
    const std::vector<gguf::Scalar>& items = array_of(*t, kTypes, gguf::ValueType::Int32, true);
    check_length(kTypes, items.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t x = gguf::as_int(items[i]).value_or(0);
      v.types[i] = x >= 0 && x <= 6 ? static_cast<TokenType>(x) : TokenType::Undefined;
    }
  }

  if (const gguf::Value* p = h.find(kPre)) v.pre_name = string_scalar(*p, kPre);
  if (!known->fixed_pre.empty()) v.pre_name = std::string(known->fixed_pre);
  if (const gguf::Value* p = h.find("general.name"); p && !p->is_array() && p->type == gguf::ValueType::String) {
    v.model_name = std::get<std::string>(p->scalar);
    for (char& c : v.model_name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }

  if (v.model == VocabModel::Spm) {
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
  } else {
    const std::optional<PreTokenizerSpec> pre = find_pre_tokenizer(v.pre_name);
    if (!pre) {
      const std::string_view why = pre_tokenizer_refusal(v.pre_name);
      fail(VocabErrorKind::UnknownPreTokenizer, kPre,
           "'" + v.pre_name + "' " +
               (why.empty() ? std::string("has no pre-tokenizer regexes here") : std::string(why)));
    }
    v.pre = pre->pre;
    v.ignore_merges = pre->ignore_merges;
    v.add_bos = pre->add_bos;
    v.spm_style = pre->spm_style;
    v.bos = 11, v.eos = 11;
    const std::vector<gguf::Scalar>& merges = array_of(require(h, kMerges), kMerges, gguf::ValueType::String, false);
    v.merges.reserve(merges.size());
    for (const gguf::Scalar& m : merges) v.merges.push_back(std::get<std::string>(m));
  }

  read_id(h, "tokenizer.ggml.bos_token_id", v.bos, n);
  read_id(h, "tokenizer.ggml.eos_token_id", v.eos, n);
  read_id(h, "tokenizer.ggml.unknown_token_id", v.unk, n);
  read_id(h, "tokenizer.ggml.padding_token_id", v.pad, n);
  read_id(h, "tokenizer.ggml.eot_token_id", v.eot, n);
  read_id(h, "tokenizer.ggml.eom_token_id", v.eom, n);
  if (auto b = find_bool(h, "tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = find_bool(h, "tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  if (auto b = find_bool(h, "tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *b;
  if (v.model == VocabModel::Bpe && find_pre_tokenizer(v.pre_name)->force_bos) v.add_bos = true;
  return v;
}

}  // namespace skainet::text
