// skainet::text — tokenizers built from a GGUF vocabulary, and token samplers.
//
//   gguf::Header h = gguf::read_header("model.gguf");
//   text::Tokenizer tok = text::Tokenizer::from_gguf(h);            // "llama" (SPM) or "gpt2" (BPE)
//   std::vector<int32_t> ids = tok.encode("Once upon a time", /*add_special=*/true);
//   std::string back = tok.decode(ids);                               // "Once upon a time"
//
//   text::StreamDecoder out(tok);                                     // holds partial UTF-8 pieces
//   text::Sampler sampler(tok.vocab_size(), {.temperature = 0.8f, .top_k = 40, .seed = 42});
//   int32_t next = sampler.sample(logits);                            // no heap allocation per call
//   sampler.accept(next);
//   std::cout << out.push(next);
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skainet/core/base.hpp"
#include "skainet/io/gguf.hpp"

namespace skainet::text {

// Token types as GGUF numbers them (tokenizer.ggml.token_type).
enum class TokenType : uint8_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

enum class VocabModel : uint8_t {
  Spm,  // tokenizer.ggml.model "llama": SentencePiece-style, merges by score, byte fallback
  Bpe,  // tokenizer.ggml.model "gpt2": byte-level BPE, merges by rank; "gemma4": BPE over raw UTF-8
        // with spaces as U+2581 (its pre-tokenizer is always PreTokenizer::Gemma4, whatever the file says)
};

// How BPE text is split into words before merging (tokenizer.ggml.pre). Each is llama.cpp's list of
// regexes for that name; SPM vocabularies have no pre-tokenizer (Default).
enum class PreTokenizer : uint8_t {
  Default,          // "default" (or absent)
  Gpt2,             // "gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", ...
  Llama3,           // "llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral", "dbrx", "glm4", ...
  Qwen2,            // "qwen2", "stablelm2", "hunyuan", "grok-2", "megrez", ...
  DeepseekCoder,    // "deepseek-coder"
  Falcon,           // "falcon"
  Starcoder,        // "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva"
  DeepseekLlm,      // "deepseek-llm"
  Deepseek3,        // "deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"
  Spark25,          // "spark2_5"
  Youtu,            // "youtu"
  Jais2,            // "jais-2"
  Qwen35,           // "qwen35"
  Poro,             // "poro-chat", "bloom", "gpt3-finnish"
  Viking,           // "viking"
  Tekken,           // "tekken"
  Chameleon,        // "chameleon"
  Gpt4o,            // "gpt-4o", "llama4", "minimax-m2", "kanana2", "talkie"
  GraniteEmbMulti,  // "granite-embed-multi-97m"
  TinyAya,          // "tiny_aya", "cohere2moe"
  Superbpe,         // "superbpe"
  Bailingmoe,       // "bailingmoe", "bailingmoe2", "llada-moe"
  SeedCoder,        // "seed-coder"
  Ufakzeka,         // "ufakzeka"
  Afmoe,            // "afmoe"
  Laguna,           // "laguna"
  ExaoneMoe,        // "exaone-moe"
  Minicpm5,         // "minicpm5"
  KimiK2,           // "kimi-k2"
  Gemma4,           // "gemma4", "granite-embed-multi-311m": newline runs apart, raw UTF-8 (Vocab::spm_style)
};
std::string_view pre_tokenizer_name(PreTokenizer p) noexcept;

enum class VocabErrorKind : uint8_t {
  MissingKey,           // a required tokenizer key is absent
  WrongType,            // a key has another value type than the tokenizer needs
  LengthMismatch,       // scores / token_type length differs from tokens
  Empty,                // no tokens
  UnknownModel,         // tokenizer.ggml.model other than "llama" / "gpt2" / "gemma4"
  UnknownPreTokenizer,  // tokenizer.ggml.pre we have no regexes for
};
std::string_view error_kind_name(VocabErrorKind k) noexcept;

// A vocabulary that cannot make a tokenizer. key() names the metadata key at fault.
class VocabError : public Error {
 public:
  VocabError(VocabErrorKind kind, std::string key, std::string message)
      : Error(std::move(message)), kind_(kind), key_(std::move(key)) {}
  VocabErrorKind kind() const noexcept { return kind_; }
  const std::string& key() const noexcept { return key_; }

 private:
  VocabErrorKind kind_;
  std::string key_;
};

// Everything a tokenizer needs, as read from the GGUF metadata (with llama.cpp's defaults filled in).
struct Vocab {
  VocabModel model = VocabModel::Spm;
  PreTokenizer pre = PreTokenizer::Default;
  std::string pre_name;             // tokenizer.ggml.pre as stored ("" when absent)
  std::vector<std::string> tokens;  // an empty token becomes "[EMPTY_<id>]", as in llama.cpp
  std::vector<float> scores;        // one per token (0 when the file has none)
  std::vector<TokenType> types;     // one per token (Normal when the file has none)
  std::vector<std::string> merges;  // BPE only: "left right", rank = index
  int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1, eom = -1;  // -1: none
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SPM: prepend " " to the text (default true)
  bool ignore_merges = false;     // BPE (llama3 family): a word that is a token is not merged
  // SPM-style BPE (Gemma 4): spaces become U+2581 before splitting, words stay raw UTF-8 (no GPT-2
  // byte alphabet), a byte no merge reaches is a "<0xXX>" token, and a word of newlines that is itself a
  // token is not merged.
  bool spm_style = false;
  std::string model_name;  // general.name, lower-cased: llama.cpp keys a few quirks to it
                           // (Phi-3: special tokens swallow the whitespace after them)

  static Vocab from_gguf(const gguf::Header& header);
};

struct DecodeOptions {
  bool render_special = false;  // write control/unknown tokens' text (e.g. "<s>") instead of nothing
  // Control tokens whose text is written even without render_special: the markers a reply is parsed
  // by (a tool call's "[TOOL_CALLS]"), as llama.cpp's preserved tokens.
  std::vector<int32_t> shown_tokens = {};
  // With add_space_prefix (SPM), drop the one space the encoder added: from the first token, or the
  // token after a leading BOS. (llama.cpp keeps it when it removes the BOS; we follow SentencePiece.)
  bool strip_leading_space = true;
};

// A byte range of a text: [offset, offset + length).
struct TextRange {
  size_t offset = 0, length = 0;
};

// Control- or unknown-token text found in a string: what parse_special would turn into that token.
struct SpecialText {
  int32_t id = -1;
  size_t offset = 0;  // where its text begins
};

class Tokenizer {
 public:
  explicit Tokenizer(Vocab vocab);
  static Tokenizer from_gguf(const gguf::Header& header) { return Tokenizer(Vocab::from_gguf(header)); }
  static Tokenizer from_file(const std::filesystem::path& gguf_path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // add_special: BOS/EOS as the vocabulary asks (add_bos/add_eos). parse_special: text such as "<s>"
  // becomes its control token; user-defined tokens are always matched whole, as in llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special = false) const;
  // As encode(text, add_special, /*parse_special=*/true), except that no control or unknown token is
  // matched inside or across the `plain` ranges: their text stays text (a chat message's content
  // inside the rendered template, so a client cannot forge turn boundaries). The rest tokenizes as the
  // whole text would, so the ids equal encode()'s wherever no such token touches a range. Ranges may
  // come in any order and overlap; one past the text throws InvalidArgument.
  std::vector<int32_t> encode(std::string_view text, bool add_special, std::span<const TextRange> plain) const;
  // The first (leftmost) control or unknown token whose text occurs in `text`, longest first as encode
  // matches them; nullopt when parse_special would change nothing in it.
  std::optional<SpecialText> find_special_text(std::string_view text) const;
  // Whether `text` begins with a proper suffix or ends with a proper prefix of a control or unknown
  // token's text: with the right text beside it, it could complete one.
  bool may_join_special_text(std::string_view text) const;

  // The bytes of one token: may be part of a UTF-8 sequence (byte tokens). Control/unknown tokens give
  // "" unless render_special. Out-of-range ids throw InvalidArgument.
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  std::string decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  int32_t vocab_size() const noexcept;
  int32_t bos() const noexcept;
  int32_t eos() const noexcept;
  bool is_eog(int32_t id) const noexcept;  // end of generation: EOS, EOT, EOM and their kin
  std::optional<int32_t> find(std::string_view token_text) const;
  const Vocab& vocab() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of ids into text that is always whole UTF-8: bytes of an incomplete sequence are
// held until the token that completes them arrives.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options = {});
  std::string push(int32_t id);  // the text that became complete with this token (maybe "")
  std::string flush();           // whatever is held (an incomplete or invalid tail), as is
  void reset();

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;
  bool first_ = true;
};

// ---- Sampling ----------------------------------------------------------------------------------

struct Candidate {
  int32_t id;
  float logit;
  float p;  // set by softmax()
};

// The building blocks, over a candidate array (each keeps its input ordered by logit descending, ties
// by lower id, from top_k on). They never allocate; each returns the number of candidates kept, and
// always keeps at least one.
namespace sampling {
int32_t greedy(std::span<const Candidate> c) noexcept;  // argmax, ties: lowest id
// llama.cpp's penalties over the last tokens, each token's logit once whatever its count c:
// repeat (positive logits / repeat, negative * repeat), then minus c * frequency + presence.
// `counts` has one slot per id, all 0 on entry and left so (no clearing pass over the vocabulary).
struct Penalties {
  float repeat = 1.0f, frequency = 0.0f, presence = 0.0f;
  bool off() const noexcept { return repeat == 1.0f && frequency == 0.0f && presence == 0.0f; }
};
void penalize(std::span<Candidate> by_id, std::span<const int32_t> last, const Penalties& penalties,
              std::span<uint32_t> counts) noexcept;
size_t top_k(std::span<Candidate> c, int32_t k) noexcept;     // sorts the kept prefix
size_t top_p(std::span<Candidate> sorted, float p) noexcept;  // smallest prefix with mass >= p
size_t min_p(std::span<Candidate> sorted, float p) noexcept;  // keeps p_i >= p * p_max
void temperature(std::span<Candidate> c, float t) noexcept;   // logit /= t
// Whether t samples as its limit, greedy: t <= 0 (or NaN), or so small that the largest finite
// logit / t overflows float (Sampler checks this first; a smaller logit overflowing is -inf, p = 0).
bool greedy_temperature(std::span<const Candidate> c, float t) noexcept;
void softmax(std::span<Candidate> c) noexcept;  // fills p
}  // namespace sampling

// xoshiro256** seeded through splitmix64: the same numbers on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) noexcept { reseed(seed); }
  void reseed(uint64_t seed) noexcept;
  uint64_t next() noexcept;
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t s_[4];
};

// What may come next besides the sampler's settings: a grammar (grammar::Matcher). The sampler masks
// the candidates with it after the penalties and before the filters, and tells it each token drawn.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logit of every candidate it does not allow to -inf (by_id: the whole vocabulary in id
  // order). Throws where it allows no token at all.
  virtual void mask(std::span<Candidate> by_id) = 0;
  virtual bool allows(int32_t id) = 0;  // one token, without working out the whole mask
  virtual void accept(int32_t id) = 0;  // the token drawn
  virtual void reset() = 0;             // back to the start of a generation
};

struct SamplerConfig {
  float temperature = 1.0f;        // <= 0, or so small that max logit / t overflows: greedy (after the penalty)
  int32_t top_k = 0;               // <= 0: off
  float top_p = 1.0f;              // >= 1: off
  float min_p = 0.0f;              // <= 0: off
  float repeat_penalty = 1.0f;     // 1: off. llama.cpp: positive logits / penalty, negative * penalty
  int32_t repeat_last_n = 64;      // how many accepted tokens the penalties look back over; -1: the context
  float frequency_penalty = 0.0f;  // 0: off. OpenAI's: logit - count * penalty over the last repeat_last_n
  float presence_penalty = 0.0f;   // 0: off. OpenAI's: logit - penalty for a token among them
  uint64_t seed = 0x5EEDu;
};

// penalty -> top-k -> top-p -> min-p -> temperature -> draw (llama.cpp's default order). All buffers
// are sized in the constructor: sample() and accept() never allocate.
class Sampler {
 public:
  // max_history: the most tokens a sequence can hold (the plan's context). The penalty never looks
  // past the sequence, so the ring holds min(repeat_last_n, max_history) ids: memory is bounded by
  // the plan whatever --repeat-last-n says. 0: the ring is repeat_last_n long.
  Sampler(int32_t vocab_size, SamplerConfig config, uint32_t max_history = 0);

  // logits.size() must be vocab_size. With a constraint, the token drawn is one it allows, and it is
  // told of it (a sampled token is always kept: speculative verification stops at the first miss).
  int32_t sample(std::span<const float> logits);
  void accept(int32_t id) noexcept;  // records id for the repetition penalty (prompt tokens too)
  void reset();                      // forgets history, reseeds, and resets the constraint
  // From the next sample() on (nullptr: none). Reset with the sampler, kept until replaced.
  void constrain(std::unique_ptr<TokenConstraint> constraint) noexcept { constraint_ = std::move(constraint); }
  bool constrained() const noexcept { return constraint_ != nullptr; }
  const SamplerConfig& config() const noexcept { return config_; }
  // The candidates that survived the filters in the last sample() call, best first.
  std::span<const Candidate> last_candidates() const noexcept { return {cand_.data(), kept_}; }

 private:
  SamplerConfig config_;
  int32_t vocab_size_;
  std::vector<Candidate> cand_;
  std::vector<int32_t> history_;  // ring buffer of repeat_last_n ids
  size_t history_size_ = 0, history_head_ = 0;
  std::vector<uint32_t> counts_;  // per id: occurrences in the ring while penalizing, else 0
  size_t kept_ = 0;
  Rng rng_;
  std::unique_ptr<TokenConstraint> constraint_;

  int32_t greedy_allowed(std::span<Candidate> c);
};

}  // namespace skainet::text
