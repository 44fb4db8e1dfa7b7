// skainet::arch — what each model architecture is, in one place: the `general.architecture` names it
// answers to, the hyper-parameter keys it reads, the features of its forward pass, and the table of
// tensors it binds (names, shapes derived from the hyper-parameters, which are optional). Plan,
// loader, model, synth, quantize and inspect ask this module; no tensor name or hyper-parameter key is
// spelled anywhere else in src/ (tests/arch/spelled_once.sh checks it in the default suite).
//
//   gguf::Header h = gguf::read_header("model.gguf");
//   arch::ModelShape s = arch::ModelShape::from_header(h);     // FormatError naming a missing key
//   if (!s.family) ...                                         // an architecture no forward pass runs
//   arch::TensorCheck c = arch::check_tensors(h, s);           // every missing / mis-shaped tensor
//   for (const arch::TensorSpec& t : arch::layer_tensors(s)) arch::layer_tensor_name(3, t.role);
//
// Adding a family: a row in families.cpp (names, features), its extra tensors in tensors.cpp, its
// extra keys in shape.cpp, then its forward pass in model/ (docs/architecture.md, "Where new things go").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skainet/io/gguf.hpp"

namespace skainet::arch {

// The forward passes the engine has. Architectures that share one (llama, mistral) share the value.
enum class Family : uint8_t { Llama, Qwen2, Qwen3, Phi3, Gemma, Gemma2, Gemma3, Qwen3Moe, GptOss };

// What distinguishes a family's forward pass from the llama one, as data the model reads.
struct Features {
  bool neox_rope = false;      // rotate pairs (i, i + d/2) instead of adjacent pairs
  bool qkv_bias = false;       // attn_q/k/v carry biases (Qwen2)
  bool qk_norm = false;        // per-head RMS norm of q and k before RoPE (Qwen3)
  bool fused_qkv = false;      // one attn_qkv weight whose rows are q, k, v (Phi-3)
  bool fused_gate_up = false;  // ffn_up holds the gate rows, then the up rows (Phi-3)
  bool rope_freqs = false;     // rope_freqs.weight divides each pair's angle (Llama 3.1+; from the file)
  bool embed_scale = false;    // the embeddings are multiplied by sqrt(dim) (Gemma)
  bool post_norms = false;     // attention and FFN outputs are RMS-normed before the residual add (Gemma 2/3)
  bool geglu = false;          // GELU(gate) * up instead of SiLU (Gemma)
  bool tied_output = false;    // the output is always token_embd; an output.weight is not read (Gemma 1, 2)
  bool moe = false;            // the FFN is a mixture of experts (qwen3moe always; a llama file when expert_count > 0)
  // gpt-oss: a learned per-head score in every attention softmax (attn_sinks), attn_output's bias, the
  // router's and the expert stacks' biases, the clamped SwiGLU (ops::swiglu_oai), and the FFN's input
  // norm stored as post_attention_norm.
  bool attn_sinks = false;
  bool out_bias = false;
  bool expert_bias = false;
  bool oai_swiglu = false;
  bool ffn_norm_post_attn = false;
  friend bool operator==(const Features&, const Features&) = default;
};

struct FamilyInfo {
  Family family;
  std::string_view name;                   // the canonical general.architecture value
  std::span<const std::string_view> also;  // other values with the same forward pass
  Features features;
  std::string_view summary;  // one line for --help and refusals
};
std::span<const FamilyInfo> families() noexcept;
// The family a general.architecture value runs as; nullptr when the engine has no forward pass for it.
const FamilyInfo* find_family(std::string_view architecture) noexcept;
const FamilyInfo& family_info(Family f) noexcept;
std::string supported_architectures();  // "llama, mistral, qwen2, qwen3, phi3, gemma, gemma2, gemma3"

// Members of a family whose files differ from it in more than sizes (synth --arch takes them too):
// "llama3" is a llama file with Llama 3's RoPE base and its rope_freqs.
struct Variant {
  std::string_view name, architecture;
  float rope_base = 10000.0f;
  bool llama3_rope_freqs = false;
  std::string_view summary;
  uint32_t experts = 0, experts_used = 0;  // > 0: a mixture of experts in every layer (Mixtral)
};
std::span<const Variant> variants() noexcept;

// Llama 3.1's RoPE frequency divisors (rope_freqs.weight, as llama.cpp's converter computes them from
// rope_scaling: factor 8, low/high frequency factors 1 and 4, original context 8192).
std::vector<float> llama3_rope_freqs(uint32_t rope_dims, float rope_base);

// Hyper-parameter keys, each "<architecture>.<suffix>" in GGUF.
enum class Key : uint8_t {
  ContextLength,
  EmbeddingLength,
  BlockCount,
  FeedForwardLength,
  HeadCount,
  HeadCountKv,
  KeyLength,
  ValueLength,
  RmsEpsilon,
  RopeDimensionCount,
  RopeFreqBase,
  RopeScalingType,
  RopeScalingFactor,
  RopeScalingOrigCtx,
  RopeScalingAttnFactor,
  VocabSize,
  SlidingWindow,
  SlidingWindowPattern,
  RopeFreqBaseSwa,
  AttnLogitSoftcapping,
  FinalLogitSoftcapping,
  ExpertCount,
  ExpertUsedCount,
  ExpertFeedForwardLength,
};
std::string key(std::string_view architecture, Key k);

// rope.scaling.type, as llama.cpp reads it: absent means linear (a factor, when given, divides the
// positions); "none" scales nothing. Other types (Phi-3's "longrope") are refused by key and value.
enum class RopeScaling : uint8_t { None, Linear, Yarn };
std::string_view rope_scaling_name(RopeScaling r) noexcept;  // the GGUF value: "none", "linear", "yarn"
std::optional<RopeScaling> parse_rope_scaling(std::string_view name) noexcept;
std::string rope_scaling_names();  // "none, linear, yarn", for messages

// The hyper-parameters every part above reads (plan sizes the KV cache and slabs from them, the
// model runs them, synth writes them). One struct for all families; features absent from a family
// keep their neutral values.
struct ModelShape {
  std::string architecture;      // general.architecture as written
  std::optional<Family> family;  // unset: no forward pass here (the plan still reads the keys)
  Features features;
  uint32_t layers = 0, dim = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, ctx_train = 0;
  uint32_t rope_dims = 0;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  // RoPE scaling (rope.scaling.*): the factor divides the positions (linear) or, with YaRN, the
  // frequencies that turn fewer than beta_slow times over yarn_orig_ctx positions (the training context
  // before the extension), leaving those above beta_fast turns unscaled. rope_attn_factor multiplies
  // every cos and sin (rope.scaling.attn_factor, with or without YaRN).
  float rope_scale = 1.0f;
  RopeScaling rope_scaling = RopeScaling::Linear;
  uint32_t yarn_orig_ctx = 0;  // YaRN only (0 otherwise): rope.scaling.original_context_length or ctx_train
  float rope_attn_factor = 1.0f;
  // Sliding-window layers (Gemma): a query sees the last `sliding_window` positions (0: none). Every
  // `swa_pattern`-th layer (the last of each run) is global, the others windowed, as llama.cpp's
  // set_swa_pattern; windowed layers rotate with their own RoPE base and scale.
  uint32_t sliding_window = 0, swa_pattern = 0;
  float rope_base_swa = 10000.0f, rope_scale_swa = 1.0f;
  float attention_scale = 0.0f;                     // q·k multiplier; 0: 1 / sqrt(head_dim)
  float attn_softcap = 0.0f, final_softcap = 0.0f;  // cap * tanh(x / cap) of scores / logits; 0: none
  // A mixture of experts (features.moe): each row's FFN is the weighted sum of `experts_used` of
  // `experts` FFNs of width `expert_ffn`, chosen by the router (0, 0, 0 without).
  uint32_t experts = 0, experts_used = 0, expert_ffn = 0;
  bool is_swa_layer(uint32_t layer) const noexcept {
    return sliding_window > 0 && (swa_pattern == 0 || layer % swa_pattern < swa_pattern - 1);
  }
  uint32_t q_dim() const noexcept { return heads * head_dim; }
  uint32_t kv_dim() const noexcept { return kv_heads * head_dim; }
  // FormatError (MissingKey / WrongValueType) naming the key when a required one is absent.
  static ModelShape from_header(const gguf::Header& h);
  // The shape of a new model of `architecture` or a variant's name (synth): family, features and the
  // variant's RoPE from the tables. InvalidArgument for a name with no family.
  static ModelShape of_family(std::string_view name);
  // The "<arch>.*" keys from_header reads back to this shape (synth writes them).
  std::vector<gguf::KeyValue> metadata() const;
  friend bool operator==(const ModelShape&, const ModelShape&) = default;
};

// What a tensor does in the forward pass. Names are spelled once, in tensors.cpp.
enum class Role : uint8_t {
  TokenEmbedding,
  OutputNorm,
  Output,  // one per model
  AttnNorm,
  AttnQ,
  AttnK,
  AttnV,
  AttnOutput,
  AttnQBias,
  AttnKBias,
  AttnVBias,
  AttnQNorm,
  AttnKNorm,
  FfnNorm,
  FfnGate,
  FfnUp,
  FfnDown,
  FfnGateInp,  // a mixture-of-experts router [dim, experts]
  AttnQkv,     // fused q, k, v (Phi-3)
  RopeFreqs,   // Llama 3.1+: per-pair RoPE frequency divisors [rope_dims / 2]
  RopeFactorsLong,
  RopeFactorsShort,  // Phi-3's LongRoPE factors: refused (TensorProblemKind::Unsupported)
  AttnPostNorm,
  FfnPostNorm,  // Gemma 2/3: norms of the attention and FFN outputs
  FfnGateExps,
  FfnUpExps,    // the experts' gate and up weights, one 2-D matrix per expert: [dim, expert_ffn, experts]
  FfnDownExps,  // the experts' down weights [expert_ffn, dim, experts]
  AttnSinks,    // gpt-oss: one sink score per query head [heads]
  AttnOutputBias,
  FfnGateInpBias,   // the router's bias [experts]
  FfnGateExpsBias,  // per expert [expert_ffn, experts]
  FfnUpExpsBias,
  FfnDownExpsBias,  // per expert [dim, experts]
};
std::string_view role_name(Role r) noexcept;  // "attn_q.weight"; the model's own: "token_embd.weight"
// Why the engine refuses a tensor of this role ("LongRoPE scaling"), empty when it does not.
std::string_view unsupported_feature(Role r) noexcept;
bool is_layer_role(Role r) noexcept;
std::string layer_tensor_name(uint32_t layer, Role r);  // "blk.3.attn_q.weight"

// A tensor name split into its layer (none for the model's own tensors) and role; nullopt for a name
// no family uses.
struct TensorName {
  std::optional<uint32_t> layer;
  Role role;
  friend bool operator==(const TensorName&, const TensorName&) = default;
};
std::optional<TensorName> parse_tensor_name(std::string_view name) noexcept;
// The layer of any "blk.N.…" name, known role or not (quantize counts layers of unknown families).
std::optional<uint32_t> layer_of(std::string_view name) noexcept;

struct TensorSpec {
  Role role;
  std::vector<uint64_t> shape;  // ggml order (innermost first), as the GGUF header stores it
  bool optional = false;        // bound when present (output.weight falls back to token_embd)
  std::string_view name() const noexcept { return role_name(role); }
};
// The tensors `s.family` binds, in the order synth writes them. Empty without a family.
std::vector<TensorSpec> model_tensors(const ModelShape& s);
std::vector<TensorSpec> layer_tensors(const ModelShape& s);

// Unsupported: a tensor the family's files may carry for a feature this engine lacks (the message
// names the feature).
enum class TensorProblemKind : uint8_t { Missing, WrongShape, Unsupported };
struct TensorProblem {
  TensorProblemKind kind;
  std::string name;
  std::vector<uint64_t> expected, found;  // found: empty when missing
  friend bool operator==(const TensorProblem&, const TensorProblem&) = default;
};
struct TensorCheck {
  uint64_t required = 0, present = 0, missing = 0, wrong_shape = 0, unsupported = 0;
  std::vector<TensorProblem> examples;  // the first few problems, at most max_examples
  bool ok() const noexcept { return missing == 0 && wrong_shape == 0 && unsupported == 0; }
  std::string describe(const ModelShape& s) const;  // bounded: counts and the examples
};
// Checks the header's tensors against the architecture, in time bounded by the header's tensor
// count (not by block_count).
TensorCheck check_tensors(const gguf::Header& h, const ModelShape& s, size_t max_examples = 10);
class TensorMismatchError : public Error {
  using Error::Error;
};

}  // namespace skainet::arch
