// Synthetic models of any family: the tensors and metadata keys of its arch table (names, shapes
// in ggml order, keys as llama.cpp writes them), filled with seeded noise. Each row draws from its own
// counter-based stream keyed by (seed, tensor name, row), so the file is the same whatever the thread
// count or tensor order.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "convert/parallel.hpp"
#include "skainet/model/convert.hpp"
#include "skainet/compute/kernels.hpp"

namespace skainet::convert {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

// Normal-ish values: the sum of four 16-bit uniforms (Irwin-Hall, n = 4) from one splitmix64 draw is
// within a few percent of a Gaussian and costs one multiply-mix per element, which keeps a 1.1B
// model's generation well under the quantization cost.
void fill_row(float* out, uint64_t n, uint64_t stream, float mean, float sigma) {
  constexpr float kCenter = 2.0f * 65535.0f;
  const float scale = sigma / (65536.0f * 0.57735027f);  // sd of the sum is 65536 * sqrt(4/12)
  uint64_t state = mix64(stream);
  for (uint64_t j = 0; j < n; ++j) {
    state += kGolden;
    const uint64_t z = mix64(state);
    const uint32_t sum = static_cast<uint32_t>((z & 0xFFFF) + ((z >> 16) & 0xFFFF) + ((z >> 32) & 0xFFFF) + (z >> 48));
    out[j] = mean + scale * (static_cast<float>(sum) - kCenter);
  }
}

struct Planned {
  TensorChoice choice;
  float mean = 0.0f, sigma = 0.02f;
  // Rows that are not noise: the family's own values (rope_freqs) or a plant (plant_tied_bigram).
  std::function<void(uint64_t row, float* out)> make_row;
};

void check_shape(const arch::ModelShape& s) {
  const auto positive = [](uint32_t v, std::string_view what) {
    if (v == 0) throw InvalidArgument(fmt::format("synth: {} must be positive", what));
  };
  positive(s.dim, "dim");
  positive(s.layers, "layers");
  positive(s.heads, "heads");
  positive(s.kv_heads, "kv-heads");
  positive(s.ffn, "ffn");
  positive(s.vocab, "vocab");
  positive(s.ctx_train, "ctx");
  positive(s.head_dim, "head-dim");
  if (s.heads % s.kv_heads != 0)
    throw InvalidArgument(fmt::format("synth: heads {} is not a multiple of kv-heads {}", s.heads, s.kv_heads));
  if (s.head_dim % 2 != 0) throw InvalidArgument(fmt::format("synth: head size {} must be even for RoPE", s.head_dim));
}

// The family's tensors, in its table's order (llama.cpp's converter order).
std::vector<Planned> plan_tensors(const arch::ModelShape& s, const Scheme& scheme) {
  std::vector<Planned> out;
  auto add = [&](std::string name, const arch::TensorSpec& spec) {
    Planned p;
    p.choice = choose_type(scheme, name, spec.shape, GgmlType::F32, s.layers, s.heads / s.kv_heads,
                           s.features.tied_output, s.features.moe ? s.experts : 0);
    const auto parsed = arch::parse_tensor_name(name);
    const auto is = [&](arch::Role r) { return parsed && parsed->role == r; };
    if (name.find("norm") != std::string::npos) {
      p.mean = 1.0f;
      p.sigma = 0.05f;
    } else if (is(arch::Role::AttnSinks)) {
      p.sigma = 1.0f;  // sinks of the scores' size (a trained gpt-oss's are), so that dropping them shows
    } else if (name.ends_with(".bias")) {
      p.sigma = 0.2f;  // large enough that a missing bias would show in the logits
    } else if (is(arch::Role::FfnGateInp)) {
      // Router logits of sd 2 over the normed input (rms ~1): a decisive choice of experts per token,
      // as a trained router makes, so a wrongly routed row would show in the logits.
      p.sigma = 2.0f / std::sqrt(static_cast<float>(s.dim));
    }
    out.push_back(std::move(p));
  };
  for (const arch::TensorSpec& t : arch::model_tensors(s)) {
    add(std::string(t.name()), t);
    if (t.role == arch::Role::RopeFreqs)  // one row
      out.back().make_row = [f = arch::llama3_rope_freqs(s.rope_dims, s.rope_base)](uint64_t, float* row) {
        std::copy(f.begin(), f.end(), row);
      };
  }
  const std::vector<arch::TensorSpec> per_layer = arch::layer_tensors(s);
  for (uint32_t l = 0; l < s.layers; ++l)
    for (const arch::TensorSpec& t : per_layer) add(arch::layer_tensor_name(l, t.role), t);
  return out;
}

// Inverse of a modulo n (gcd(a, n) = 1), by the extended Euclidean algorithm.
uint64_t inverse_mod(uint64_t a, uint64_t n) {
  int64_t t = 0, new_t = 1;
  int64_t r = static_cast<int64_t>(n), new_r = static_cast<int64_t>(a % n);
  while (new_r != 0) {
    const int64_t q = r / new_r;
    t = std::exchange(new_t, t - q * new_t);
    r = std::exchange(new_r, r - q * new_r);
  }
  return static_cast<uint64_t>(t < 0 ? t + static_cast<int64_t>(n) : t);
}

uint64_t elements_of(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n = checked_mul(n, d, "tensor elements");
  return n;
}

}  // namespace

std::optional<arch::ModelShape> find_preset(std::string_view name) noexcept {
  const auto shape = [](uint32_t dim, uint32_t layers, uint32_t heads, uint32_t kv_heads, uint32_t ffn, uint32_t vocab,
                        uint32_t n_ctx) {
    arch::ModelShape s;
    s.architecture = arch::family_info(arch::Family::Llama).name;
    s.dim = dim, s.layers = layers, s.heads = heads, s.kv_heads = kv_heads, s.ffn = ffn, s.vocab = vocab;
    s.ctx_train = n_ctx;
    return s;
  };
  if (name == "tiny") return shape(256, 2, 4, 2, 512, 512, 256);
  if (name == "stories15M") return shape(288, 6, 6, 6, 768, 32000, 256);
  if (name == "tinyllama-1.1b") return shape(2048, 22, 32, 4, 5632, 32000, 2048);
  return std::nullopt;
}

std::vector<std::string_view> preset_names() { return {"tiny", "stories15M", "tinyllama-1.1b"}; }

uint64_t BigramPlant::predecessor(uint64_t u) const noexcept { return (stride * u + offset) % vocab; }
uint64_t BigramPlant::successor(uint64_t t) const noexcept {
  return inverse_mod(stride, vocab) * ((t + vocab - offset % vocab) % vocab) % vocab;
}

// How strong the plant is. The final hidden state is x = e + r: the token's embedding e (sd sigma_e)
// plus what the layers added, r, random with rms about 0.8 * sqrt(layers) (measured: 1.16 after two
// layers). The successor's logit carries lean * e.x / rms(x), whose signal-to-noise ratio is |e| / rms(r)
// = sqrt(dim) * sigma_e / rms(r); sigma_e = 8 * sqrt(layers / dim) makes it about 10 for any shape. The
// lean makes the planted part of an output row twice the size of its random part (sd 0.02). Measured
// on the TinyLlama shape: the successor stands ~8 sd above the mean logit and a median 4 sd (at least
// 1.4) above the runner-up, far beyond the <= 0.1 sd by which 8-bit activation rounding moves a logit
// (2-layer Q8_0 against llama.cpp), while the layers still set every other logit (and a tenth of the
// winner's).
BigramPlant bigram_plant(const arch::ModelShape& shape) {
  BigramPlant p;
  p.vocab = shape.vocab;
  p.embedding_sigma = 8.0f * std::sqrt(static_cast<float>(shape.layers) / static_cast<float>(shape.dim));
  p.lean = 2.0f * 0.02f / p.embedding_sigma;
  if (shape.features.tied_output)
    p.embedding_sigma = 0.24f / std::sqrt(static_cast<float>(shape.dim));  // see plant_tied_bigram
  // A stride near vocab / golden ratio scatters successors over the whole vocabulary.
  p.stride = std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(shape.vocab) * 0.6180339887));
  while (std::gcd(p.stride, p.vocab) != 1) ++p.stride;
  p.offset = shape.vocab / 3;
  return p;
}

namespace {

// The bigram plant of a family whose output is its embedding (Gemma 2): output row u is e_u itself,
// and e_t·e_u is largest at u = t, so leaning the output rows cannot work. Layer 0's attention does
// it instead, as a linear map no symmetric one can be:
//   e_u = [r_u ; r_pred(u)]            (halves of dim / 2; r_v drawn per token, sd sigma)
//   q = k = c·x̂ on first-half coordinates, so each token attends to itself (self score ~60 against
//       ~c² sd for the others, before the soft cap); v copies those coordinates and the output
//       projection writes them to the second half: attention adds [0 ; r_t / sigma], post-normed to
//       rms sqrt(2) there, while the input's second half, sqrt(dim)·r_pred(t), has rms sqrt(dim)·sigma
//       (0.24 with sigma = 0.24 / sqrt(dim));
//   output_norm zeroes the first half, so logit(u) = h·e_u ∝ (second half of h)·r_pred(u): largest
//       where pred(u) = t, i.e. u = successor(t) (about 3.6 against 1.0 for the best of 32000 others
//       at dim 512), while t itself gets only the input's 0.6.
// Every other post-norm is 0.1, so the layers' noise stays under the plant; their weights stay random.
void plant_tied_bigram(const arch::ModelShape& s, std::vector<Planned>& plan, const BigramPlant& plant, uint64_t seed) {
  const uint64_t half = s.dim / 2, hd = s.head_dim, kv_heads = s.kv_heads, group = s.heads / s.kv_heads;
  const float sigma = plant.embedding_sigma;
  const float c = std::sqrt(60.0f / std::sqrt(static_cast<float>(hd)));  // self score c² sqrt(hd)
  const uint64_t embd_seed = seed ^ fnv1a(arch::role_name(arch::Role::TokenEmbedding));
  const auto draw = [=](uint64_t token, float* out) {
    fill_row(out, half, embd_seed + token * kGolden * 3, 0.0f, sigma);
  };
  // The first-half coordinate that column j of KV head g reads.
  const auto coordinate = [=](uint64_t g, uint64_t j) { return (g * hd + j) % half; };
  for (Planned& p : plan) {
    const auto name = arch::parse_tensor_name(p.choice.name);
    if (!name) continue;
    if (name->role == arch::Role::AttnPostNorm || name->role == arch::Role::FfnPostNorm) {
      const bool planted = name->layer == 0 && name->role == arch::Role::AttnPostNorm;
      p.mean = planted ? 1.0f : 0.1f, p.sigma = planted ? 0.05f : 0.01f;
      continue;
    }
    if (name->layer.value_or(0) != 0) continue;
    const uint64_t k = p.choice.shape[0];
    const auto fill = [k](float* out, float v) { std::fill_n(out, k, v); };
    switch (name->role) {
      case arch::Role::TokenEmbedding:
        p.make_row = [=](uint64_t u, float* out) {
          draw(u, out);
          draw(plant.predecessor(u), out + half);
        };
        break;
      case arch::Role::OutputNorm:
        p.make_row = [=](uint64_t, float* out) {
          std::fill_n(out, half, 0.0f);
          std::fill_n(out + half, k - half, 1.0f);
        };
        break;
      case arch::Role::AttnQ:  // row o: head o / hd of KV group (o / hd) / group
        p.make_row = [=](uint64_t o, float* out) {
          fill(out, 0.0f);
          out[coordinate(o / hd / group, o % hd)] = c;
        };
        break;
      case arch::Role::AttnK:
      case arch::Role::AttnV: {
        const float v = name->role == arch::Role::AttnK ? c : 1.0f;
        p.make_row = [=](uint64_t o, float* out) {
          fill(out, 0.0f);
          out[coordinate(o / hd, o % hd)] = v;
        };
        break;
      }
      case arch::Role::AttnOutput:  // row m < half: nothing; m = half + i: from the first head reading i
        p.make_row = [=](uint64_t m, float* out) {
          fill(out, 0.0f);
          if (m < half) return;
          const uint64_t i = m - half, g = (i / hd) % kv_heads, j = i % hd;
          if (coordinate(g, j) == i) out[g * group * hd + j] = 1.0f;
        };
        break;
      default: break;
    }
  }
}

// The experts of a mixture: the family's count unless given; a llama file given experts is Mixtral
// (its experts as wide as ffn); qwen3moe's experts are ffn wide unless given their own width.
void read_experts(const SynthOptions& options, arch::ModelShape& shape) {
  const arch::ModelShape& n = options.shape;
  if (n.experts != 0) {
    if (!shape.features.moe && shape.family != arch::Family::Llama)
      throw InvalidArgument(fmt::format("synth: architecture '{}' has no experts", options.arch));
    shape.features.moe = true, shape.experts = n.experts;
  }
  if (!shape.features.moe) {
    if (n.experts_used != 0 || n.expert_ffn != 0)
      throw InvalidArgument(fmt::format("synth: architecture '{}' without --experts has no experts", options.arch));
    return;
  }
  shape.experts_used = n.experts_used != 0 ? n.experts_used : std::min(shape.experts_used, shape.experts);
  if (shape.experts_used == 0) shape.experts_used = std::min(2u, shape.experts);
  if (shape.experts_used > shape.experts)
    throw InvalidArgument(
        fmt::format("synth: {} experts used of {}: at most all of them", shape.experts_used, shape.experts));
  if (n.expert_ffn != 0 && shape.family != arch::Family::Qwen3Moe && shape.family != arch::Family::GptOss)
    throw InvalidArgument("synth: Mixtral's experts are --ffn wide (no --expert-ffn)");
  shape.expert_ffn = n.expert_ffn != 0 ? n.expert_ffn : shape.ffn;
}

// The RoPE scaling asked for (by default linear by 1: no key written); YaRN's original context defaults
// to the training context, as llama.cpp reads a file without one. Windowed layers follow the reader
// (ModelShape::from_header), so the shape written is the shape read back.
void read_rope_scaling(const SynthOptions& options, arch::ModelShape& shape) {
  const arch::ModelShape& n = options.shape;
  if (n.yarn_orig_ctx != 0 && n.rope_scaling != arch::RopeScaling::Yarn)
    throw InvalidArgument("synth: an original context (--yarn-orig-ctx) needs YaRN (--rope-scaling yarn)");
  if (n.rope_scale <= 0.0f || !std::isfinite(n.rope_scale))
    throw InvalidArgument(fmt::format("synth: RoPE scaling factor {} is not a positive number", n.rope_scale));
  shape.rope_scaling = n.rope_scaling;
  shape.rope_scale = n.rope_scaling == arch::RopeScaling::None ? 1.0f : n.rope_scale;
  if (shape.rope_scaling == arch::RopeScaling::Yarn)
    shape.yarn_orig_ctx = n.yarn_orig_ctx ? n.yarn_orig_ctx : n.ctx_train;
  if (shape.family == arch::Family::GptOss || shape.family == arch::Family::Gemma2)
    shape.rope_scale_swa = shape.rope_scale;
}

// The family's own tensors and keys around the given numbers; head_dim 0 means dim / heads. The
// vocabulary's keys are returned in `vocab` (copied from options.vocab_from, or the built-in one).
arch::ModelShape shape_of(const SynthOptions& options, std::vector<gguf::KeyValue>& vocab) {
  arch::ModelShape shape = arch::ModelShape::of_family(options.arch);
  const arch::ModelShape& n = options.shape;
  shape.dim = n.dim, shape.layers = n.layers, shape.heads = n.heads, shape.kv_heads = n.kv_heads, shape.ffn = n.ffn;
  shape.vocab = n.vocab, shape.ctx_train = n.ctx_train;
  if (n.sliding_window != 0) {  // else the family's
    if (shape.sliding_window == 0)
      throw InvalidArgument(fmt::format("synth: architecture '{}' has no sliding-window layers", options.arch));
    shape.sliding_window = n.sliding_window;
  }
  read_experts(options, shape);
  read_rope_scaling(options, shape);
  if (n.head_dim == 0 && n.heads != 0 && n.dim % n.heads != 0)
    throw InvalidArgument(
        fmt::format("synth: dim {} is not a multiple of heads {} (or give the head size)", n.dim, n.heads));
  shape.head_dim = n.head_dim != 0 ? n.head_dim : n.heads != 0 ? n.dim / n.heads : 0;
  shape.rope_dims = shape.head_dim;
  if (options.vocab_from) {
    const gguf::Header source = gguf::read_header(*options.vocab_from);
    vocab = vocabulary_of(source);
    shape.vocab = static_cast<uint32_t>(source.find("tokenizer.ggml.tokens")->items.size());
  }
  check_shape(shape);
  if (!options.vocab_from) vocab = builtin_vocabulary(shape.vocab);
  return shape;
}

void write_metadata(gguf::Writer& writer, const arch::ModelShape& shape, const SynthOptions& options,
                    std::vector<gguf::KeyValue> vocab) {
  writer.set("general.architecture", gguf::Value::string(shape.architecture));
  writer.set("general.name", gguf::Value::string(options.name));
  for (gguf::KeyValue& kv : shape.metadata()) writer.set(std::move(kv.key), std::move(kv.value));
  writer.set("general.file_type", gguf::Value::u32(static_cast<uint32_t>(options.scheme.file_type)));
  writer.set("general.quantization_version", gguf::Value::u32(2));
  for (gguf::KeyValue& kv : vocab) writer.set(std::move(kv.key), std::move(kv.value));
}

// One tensor's rows, drawn and quantized on `threads` workers into dst (the file's bytes of it). With
// a planted bigram the output rows lean towards their predecessor's embedding row.
void write_rows(const Planned& p, std::span<std::byte> dst, uint64_t seed, const std::optional<BigramPlant>& plant,
                unsigned threads) {
  const uint64_t row = p.choice.shape[0];
  const uint64_t rows = elements_of(p.choice.shape) / row;
  const GgmlType type = p.choice.type;
  const uint64_t row_size = row_bytes(type, row);
  const uint64_t tensor_seed = seed ^ fnv1a(p.choice.name);
  const bool lean = plant && p.choice.name == arch::role_name(arch::Role::Output);
  const uint64_t embd_seed = seed ^ fnv1a(arch::role_name(arch::Role::TokenEmbedding));
  detail::parallel_for(rows, threads, std::max<uint64_t>(1, 65536 / row), [&](uint64_t begin, uint64_t end) {
    std::vector<float> buffer(type == GgmlType::F32 ? 0 : row), embedding(lean ? row : 0);
    for (uint64_t r = begin; r < end; ++r) {
      std::byte* target = dst.data() + r * row_size;
      float* values = type == GgmlType::F32 ? reinterpret_cast<float*>(target) : buffer.data();
      if (p.make_row)
        p.make_row(r, values);
      else
        fill_row(values, row, tensor_seed + r * kGolden * 3, p.mean, p.sigma);
      if (lean) {  // the same draw as token_embd's row of the predecessor
        fill_row(embedding.data(), row, embd_seed + plant->predecessor(r) * kGolden * 3, 0.0f, plant->embedding_sigma);
        for (uint64_t j = 0; j < row; ++j) values[j] += plant->lean * embedding[j];
      }
      if (type != GgmlType::F32) kernels::ref::quantize_row(type, values, target, static_cast<int64_t>(row));
    }
  });
}

}  // namespace

Report synth(const std::filesystem::path& out, const SynthOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<gguf::KeyValue> vocab;
  const arch::ModelShape shape = shape_of(options, vocab);
  gguf::Writer writer(out);
  write_metadata(writer, shape, options, std::move(vocab));

  std::vector<Planned> plan = plan_tensors(shape, options.scheme);
  const uint64_t seed = mix64(options.seed ^ 0x5EED5EED5EED5EEDull);
  const std::optional<BigramPlant> plant = options.bigram ? std::optional(bigram_plant(shape)) : std::nullopt;
  if (plant && shape.features.tied_output) {
    plant_tied_bigram(shape, plan, *plant, seed);
  } else if (plant) {
    for (Planned& p : plan)
      if (p.choice.name == arch::role_name(arch::Role::TokenEmbedding)) p.sigma = plant->embedding_sigma;
  }
  Report report;
  report.output = out;
  for (const Planned& p : plan) {
    writer.add_tensor(p.choice.name, p.choice.shape, p.choice.type);
    report.parameters += elements_of(p.choice.shape);
    report.tensors.push_back(p.choice);
  }

  const unsigned threads = detail::resolve_threads(options.threads);
  std::optional<base::Progress> progress;
  if (options.progress) progress.emplace("synth", writer.data_bytes());

  report.bytes_written =
      writer.write([&](size_t index, std::span<std::byte> dst) { write_rows(plan[index], dst, seed, plant, threads); },
                   progress ? &*progress : nullptr);
  if (progress) progress->finish();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace skainet::convert
