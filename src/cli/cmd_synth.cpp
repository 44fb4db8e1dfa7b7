// `skainet synth OUT.gguf`: a model of any family the engine runs, with seeded random weights, for
// tests and benchmarks.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli.hpp"

namespace skainet::cli {

Subcommand add_synth(CLI::App& app) {
  struct Options {
    std::string out, preset = "tiny", type = "F32", vocab_from, name = "skainet-synth", arch = "llama";
    std::optional<uint32_t> dim, layers, heads, kv_heads, head_dim, ffn, vocab, n_ctx, window;
    std::optional<uint32_t> experts, experts_used, expert_ffn, yarn_orig_ctx;
    std::optional<std::string> rope_scaling;
    std::optional<float> rope_scale;
    uint64_t seed = 0;
    unsigned threads = 0;
    bool verbose = false, bigram = false, quiet = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("synth", "Write a GGUF of a supported architecture with seeded pseudo-random weights");
  sub->add_option("OUT", o->out, "Output GGUF file")->required();
  sub->add_option("--preset", o->preset, fmt::format("Model shape: {}", fmt::join(convert::preset_names(), ", ")))
      ->capture_default_str();
  sub->add_option("--type", o->type, "Weight type: " + convert::scheme_names())->capture_default_str();
  std::string families;
  for (const arch::FamilyInfo& f : arch::families()) families += fmt::format("\n  {}: {}", f.name, f.summary);
  for (const arch::Variant& v : arch::variants()) families += fmt::format("\n  {}: {}", v.name, v.summary);
  sub->add_option("--arch", o->arch, "Architecture (general.architecture):" + families)->capture_default_str();
  sub->add_option("--dim", o->dim, "Embedding size (overrides the preset)");
  sub->add_option("--layers", o->layers, "Block count");
  sub->add_option("--heads", o->heads, "Attention heads");
  sub->add_option("--kv-heads", o->kv_heads, "Key/value heads (grouped-query attention)");
  sub->add_option("--head-dim", o->head_dim, "Size of one head (default: dim / heads)");
  sub->add_option("--sliding-window", o->window,
                  "Window of the sliding-window layers (Gemma, gpt-oss; default: the family's)");
  sub->add_option("--rope-scaling", o->rope_scaling,
                  "RoPE scaling type: " + arch::rope_scaling_names() + " (default: linear, by --rope-scale)");
  sub->add_option("--rope-scale", o->rope_scale, "RoPE scaling factor (default 1)");
  sub->add_option("--yarn-orig-ctx", o->yarn_orig_ctx, "YaRN's original training context (default: --ctx)");
  sub->add_option("--ffn", o->ffn, "Feed-forward size");
  sub->add_option("--experts", o->experts,
                  "Experts of a mixture-of-experts FFN (qwen3moe: default 8; llama: Mixtral, its experts --ffn wide)");
  sub->add_option("--experts-used", o->experts_used, "Experts each token is routed to (default 2)");
  sub->add_option("--expert-ffn", o->expert_ffn, "Width of one expert's FFN (qwen3moe, gpt-oss; default: --ffn)");
  sub->add_option("--vocab", o->vocab, "Vocabulary size of the built-in vocabulary (at least 259)");
  sub->add_option("--ctx", o->n_ctx, "Context length");
  sub->add_option("--seed", o->seed, "Seed of the weights")->capture_default_str();
  sub->add_option("--vocab-from", o->vocab_from, "Copy the tokenizer.* keys of this GGUF (the vocab size follows it)");
  sub->add_option("--name", o->name, "general.name")->capture_default_str();
  sub->add_option("--threads", o->threads, "Worker threads (0: all cores)")->capture_default_str();
  sub->add_flag("--bigram", o->bigram,
                "Plant a bigram table (each token a pseudo-random successor) so each step has a decisive top-1, "
                "as a trained model's does");
  sub->add_flag("--verbose,-v", o->verbose, "List every tensor's type decision");
  sub->add_flag("-q,--quiet", o->quiet, "No progress on stderr (on a terminal a bar, piped a line every 5 s)");
  return {sub, [o] {
            convert::SynthOptions s;
            auto preset = convert::find_preset(o->preset);
            if (!preset)
              throw InvalidArgument(
                  fmt::format("unknown preset '{}' (known: {})", o->preset, fmt::join(convert::preset_names(), ", ")));
            s.shape = *preset;
            if (o->dim) s.shape.dim = *o->dim;
            if (o->layers) s.shape.layers = *o->layers;
            if (o->heads) s.shape.heads = *o->heads;
            if (o->kv_heads) s.shape.kv_heads = *o->kv_heads;
            if (o->ffn) s.shape.ffn = *o->ffn;
            if (o->vocab) s.shape.vocab = *o->vocab;
            if (o->n_ctx) s.shape.ctx_train = *o->n_ctx;
            if (o->head_dim) s.shape.head_dim = *o->head_dim;
            if (o->window) s.shape.sliding_window = *o->window;
            if (o->rope_scaling) {
              const auto r = arch::parse_rope_scaling(*o->rope_scaling);
              if (!r)
                throw InvalidArgument(fmt::format("unknown --rope-scaling '{}' (known: {})", *o->rope_scaling,
                                                  arch::rope_scaling_names()));
              s.shape.rope_scaling = *r;
            }
            if (o->rope_scale) s.shape.rope_scale = *o->rope_scale;
            s.shape.yarn_orig_ctx = o->yarn_orig_ctx.value_or(0);
            s.shape.experts = o->experts.value_or(0);
            s.shape.experts_used = o->experts_used.value_or(0);
            s.shape.expert_ffn = o->expert_ffn.value_or(0);
            if (o->heads && !o->kv_heads) s.shape.kv_heads = *o->heads;  // no grouping unless asked
            if (!o->vocab_from.empty()) {
              if (o->vocab)
                throw InvalidArgument(
                    "--vocab and --vocab-from exclude each other: the vocabulary size follows --vocab-from");
              s.vocab_from = o->vocab_from;
            }
            s.scheme = convert::parse_scheme(o->type);
            s.seed = o->seed;
            s.name = o->name;
            s.threads = o->threads;
            s.bigram = o->bigram;
            s.arch = o->arch;
            s.progress = !o->quiet;
            const convert::Report r = convert::synth(o->out, s);
            fmt::print("wrote {}: {} parameters, {} tensors, {} ({}), {} in {:.2f} s\n", r.output.string(),
                       human_count(r.parameters), r.tensors.size(), s.scheme.name,
                       static_cast<uint32_t>(s.scheme.file_type), base::format_bytes(r.bytes_written), r.seconds);
            print_report(r, o->verbose);
            return 0;
          }};
}

}  // namespace skainet::cli
