// skainet::convert — writing GGUF models: seeded synthetic llama models (synth) and re-encoding an
// existing model's weights (quantize), both streamed one tensor at a time through gguf::Writer.
// The type each tensor gets is a decision made as data (TensorChoice), so reports and tests read it.
//
//   using namespace skainet;
//   convert::SynthOptions s;
//   s.shape = *convert::find_preset("tiny");
//   s.scheme = convert::parse_scheme("Q4_K_M");
//   convert::Report r = convert::synth("tiny.gguf", s);
//
//   convert::QuantizeOptions q;
//   q.scheme = convert::parse_scheme("q8_0");
//   convert::Report r2 = convert::quantize("in.gguf", "out.gguf", q);
//   for (const auto& t : r2.tensors) if (t.fallback) std::cout << t.name << " fell back\n";
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skainet/io/arch.hpp"
#include "skainet/core/format.hpp"
#include "skainet/io/gguf.hpp"

namespace skainet::convert {

// llama.cpp's LLAMA_FTYPE numbering, stored as general.file_type.
enum class FileType : uint32_t {
  AllF32 = 0,
  MostlyF16 = 1,
  MostlyQ4_0 = 2,
  MostlyQ4_1 = 3,
  MostlyQ8_0 = 7,
  MostlyQ5_0 = 8,
  MostlyQ5_1 = 9,
  MostlyQ2_K = 10,
  MostlyQ3_K_S = 11,
  MostlyQ3_K_M = 12,
  MostlyQ3_K_L = 13,
  MostlyQ4_K_S = 14,
  MostlyQ4_K_M = 15,
  MostlyQ5_K_S = 16,
  MostlyQ5_K_M = 17,
  MostlyQ6_K = 18,
  MostlyIQ4_NL = 25,
  MostlyIQ4_XS = 30,
  MostlyBF16 = 32,
  MostlyMXFP4_MOE = 38,
};

// A target the user can ask for: a single type written uniformly, or a llama.cpp-style mix whose
// per-tensor rules (choose_type) raise some tensors above `base`.
struct Scheme {
  std::string_view name;  // "Q4_K_M"
  FileType file_type;
  GgmlType base;  // the type most matmul weights get
  bool mixed;     // llama.cpp's per-tensor rules apply
};
std::span<const Scheme> schemes() noexcept;
std::string scheme_names();  // "F32, F16, ..., IQ4_XS": what parse_scheme knows, for help texts
// Case-insensitive; "Q3_K", "Q4_K" and "Q5_K" mean Q3_K_M, Q4_K_M and Q5_K_M, as llama-quantize reads them.
std::optional<Scheme> find_scheme(std::string_view name) noexcept;
Scheme parse_scheme(std::string_view name);  // InvalidArgument naming the type and the known ones

// Why a tensor got the type it is written in.
enum class TypeRule : uint8_t {
  Base,          // the scheme's base type
  KeptF32,       // norms, 1-D tensors and non-weights are not quantized: F32
  Copied,        // a non-float tensor (e.g. I32) is copied unchanged
  OutputTensor,  // mix: output.weight gets Q6_K, or Q8_0 when its rows do not fit the base blocks
  MoreBits,      // mix: attn_v / ffn_down / attn_output of some layers get a larger type (llama.cpp's rules)
  NonExpert,     // MXFP4_MOE: only the 3-D expert stacks are MXFP4, every other weight Q8_0
};
std::string_view rule_name(TypeRule r) noexcept;

enum class FallbackReason : uint8_t {
  RowNotMultipleOfBlock,  // the row length (shape[0]) is not a multiple of the wanted block size
};
std::string_view fallback_reason_name(FallbackReason r) noexcept;

struct Fallback {
  GgmlType wanted;  // what the rules asked for
  GgmlType chosen;  // what fits: K-quant -> 32-block legacy (llama.cpp's table) -> F16
  FallbackReason reason;
  uint64_t row_elements;  // shape[0]
  uint32_t wanted_block;  // block size of `wanted`
};

struct TensorChoice {
  std::string name;
  std::vector<uint64_t> shape;  // ggml order
  GgmlType source = GgmlType::F32;
  GgmlType type = GgmlType::F32;  // what is written (after any fallback)
  TypeRule rule = TypeRule::Base;
  std::optional<Fallback> fallback;
};

// True for the weights llama.cpp quantizes: named *weight, at least 2-D, not a norm.
bool is_quantizable(std::string_view name, std::span<const uint64_t> shape) noexcept;
// The type of one tensor under `scheme`. n_layers is the model's block count and n_gqa its query
// heads per KV head (for the mix rules); tied_embeddings: the model has no output.weight, so its
// token_embd is the output and gets the output's type (llama.cpp's has_tied_embeddings); n_experts:
// the mixture's expert count (0: none; 8 has rules of its own in llama.cpp).
TensorChoice choose_type(const Scheme& scheme, std::string_view name, std::span<const uint64_t> shape, GgmlType source,
                         uint32_t n_layers, uint32_t n_gqa = 1, bool tied_embeddings = false, uint32_t n_experts = 0);

struct Report {
  std::filesystem::path output;
  std::vector<TensorChoice> tensors;  // in file order
  uint64_t bytes_written = 0;
  uint64_t bytes_read_from = 0;  // quantize: the input file's size
  uint64_t parameters = 0;
  double seconds = 0;
  size_t fallback_count() const noexcept;
};

// ---- synth ---------------------------------------------------------------------------------

// A preset's hyper-parameters (ModelShape's numbers; synth puts them in the family of
// SynthOptions::arch): "tiny" (dim 256, 2 layers: fast tests, K-quants fit), "stories15M",
// "tinyllama-1.1b". head_dim 0: dim / heads.
std::optional<arch::ModelShape> find_preset(std::string_view name) noexcept;
std::vector<std::string_view> preset_names();

struct SynthOptions {
  arch::ModelShape shape;  // its numbers; architecture, family and features follow `arch`
  Scheme scheme = *find_scheme("F32");
  uint64_t seed = 0;
  std::optional<std::filesystem::path> vocab_from;  // copy its tokenizer.* keys; vocab follows it
  std::string name = "skainet-synth";               // general.name
  unsigned threads = 0;                             // 0: all hardware threads
  bool progress = false;                            // a progress bar on stderr (when a terminal)
  // A general.architecture with a family (arch::families()): the tensors and keys written are its own.
  std::string arch = "llama";
  // Plant a bigram table: each token gets a pseudo-random successor whose output row leans toward the
  // token's embedding, so every step has a decisive top-1 as a trained model's does (docs/cli.md).
  bool bigram = false;
};

// Writes a GGUF of `arch` (its tensors and keys, arch::layer_tensors) with seeded pseudo-random weights (matmuls ~N(0,
// 0.02), norms ~1; with `bigram`, see BigramPlant). The bytes depend only on the options, not on the thread count.
Report synth(const std::filesystem::path& out, const SynthOptions& options);

// The bigram table `SynthOptions::bigram` plants: successor(t) = (t - offset) * stride^-1 mod vocab, i.e.
// output row u leans toward the embedding of token predecessor(u) = (stride * u + offset) mod vocab.
// Embeddings are drawn with sd `embedding_sigma` (instead of 0.02) and output row u adds
// `lean` * embedding(predecessor(u)). Exposed so tests can check a generated sequence follows it.
struct BigramPlant {
  uint64_t vocab = 0, stride = 1, offset = 0;
  float embedding_sigma = 0.02f, lean = 0.0f;
  uint64_t predecessor(uint64_t u) const noexcept;
  uint64_t successor(uint64_t t) const noexcept;
};
BigramPlant bigram_plant(const arch::ModelShape& shape);

// The built-in SentencePiece-style vocabulary (tokenizer.ggml.model "llama"): <unk>, <s>, </s>, the
// 256 byte tokens <0x00>..<0xFF>, then pieces ("▁", characters, "▁"+word pieces) up to n_vocab.
// n_vocab must be at least 259.
std::vector<gguf::KeyValue> builtin_vocabulary(uint32_t n_vocab);
// All tokenizer.* keys of `h`; FormatError if it has no tokenizer.ggml.tokens array.
std::vector<gguf::KeyValue> vocabulary_of(const gguf::Header& h);

// ---- value checks (--check-tensors) --------------------------------------------------------

// The first non-finite value of a tensor: its element index (row-major), its block, the value.
struct NonFiniteValue {
  std::string tensor;
  uint64_t element = 0, block = 0;
  float value = 0;
};
std::string describe(const NonFiniteValue& v);  // "tensor 'x': element 96 (block 3) is nan"
class NonFiniteError : public Error {
  using Error::Error;
};

struct ValueCheck {
  std::vector<NonFiniteValue> findings;  // one per bad tensor, the first max_findings of them
  uint64_t tensors_checked = 0, tensors_skipped = 0, tensors_bad = 0, bytes = 0;
  double seconds = 0;
  bool ok() const noexcept { return tensors_bad == 0; }
  std::string summary() const;                                 // counts, bytes, time
  void throw_if_bad(const std::filesystem::path& file) const;  // NonFiniteError naming each finding
};
// Decodes every tensor with a reference dequantizer (a NaN or infinite scale shows as non-finite
// values of its block) and reports the first non-finite value of each. Reads every payload byte.
ValueCheck check_values(const gguf::Header& h, unsigned threads = 0, size_t max_findings = 10);
// Rows [begin_row, end_row) of `row`-element rows of `type` at data; scratch is resized to a row.
std::optional<NonFiniteValue> find_non_finite(GgmlType type, const std::byte* data, uint64_t row, uint64_t begin_row,
                                              uint64_t end_row, std::vector<float>& scratch);
// The same over all `rows` rows, split across `threads` (0: all hardware threads): the first
// non-finite value by element index, its tensor name left empty.
std::optional<NonFiniteValue> first_non_finite(GgmlType type, const std::byte* data, uint64_t row, uint64_t rows,
                                               unsigned threads);

// ---- quantize ------------------------------------------------------------------------------

struct QuantizeOptions {
  Scheme scheme = *find_scheme("Q8_0");
  unsigned threads = 0;
  bool progress = false;
};

// Re-encodes every quantizable weight of `in` to the scheme, keeps norms F32, copies all metadata
// (general.file_type updated). Streamed: memory stays near one tensor. Atomic: `out` appears only
// complete. NonFiniteError naming the tensor, element and value when an output value is NaN or
// infinite (a NaN input, or a finite value out of the target type's range, e.g. 3e38 into an F16
// scale). InvalidArgument, before anything is written, when `out` is `in` (same device and inode,
// whatever hard or symbolic link leads there).
Report quantize(const std::filesystem::path& in, const std::filesystem::path& out, const QuantizeOptions& options);

}  // namespace skainet::convert
