// `skainet run`: load exactly as planned and generate, streaming tokens to stdout and stats to stderr.
// Flag names follow llama.cpp's (-m -p -n -t -c --temp --top-k --top-p --min-p --repeat-penalty -s).
#include <sys/resource.h>

#include <cstdio>
#include <random>

#include <fmt/format.h>

#include "cli.hpp"
#include "placement_args.hpp"
#include "skainet/engine.hpp"

namespace skainet::cli {
namespace {

struct RunArgs {
  std::string model;
  std::string prompt;
  int32_t n_predict = 128;
  int threads = static_cast<int>(base::default_threads());
  int64_t seed = -1;
  text::SamplerConfig sampling{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f};
  PlacementArgs placement;
  bool no_display_prompt = false;
  bool ignore_eos = false;
  bool force = false;
  bool check_tensors = false;
};

void print_stats(const generate::Engine& e, const generate::Stats& s, uint64_t seed) {
  const plan::MemoryPlan& p = e.plan;
  fmt::print(stderr, "\n\nskainet: load {:.2f} s | prompt {} tokens, {:.1f} tokens/s | generated {} tokens, {:.1f} tokens/s | "
                     "first token {:.0f} ms | stop: {}\n",
             e.load_seconds, s.prompt_tokens, s.prompt_tokens_per_second(), s.generated_tokens,
             s.decode_tokens_per_second(), s.first_token_seconds * 1000, generate::stop_reason_name(s.stop));
  fmt::print(stderr, "skainet: memory plan resident {} (mapped {}, heap {}, pages {}, kv {}, slab {}) | profile {} | seed {}\n",
             base::format_bytes(p.totals.resident()), base::format_bytes(p.totals.mapped), base::format_bytes(p.totals.heap),
             base::format_bytes(p.totals.pages), base::format_bytes(p.totals.kv), base::format_bytes(p.totals.slab),
             p.profile, seed);
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  fmt::print(stderr, "skainet: step slab {} peak {} | layer slab peak {} | overflow {} in {} allocations | peak RSS {} ({} bytes)\n",
             base::format_bytes(s.step_slab_bytes), base::format_bytes(s.step_slab_peak),
             base::format_bytes(s.layer_slab_peak), base::format_bytes(s.overflow_bytes), s.overflow_count,
             base::format_bytes(static_cast<uint64_t>(ru.ru_maxrss) * 1024), static_cast<uint64_t>(ru.ru_maxrss) * 1024);
}

int run(RunArgs& a) {
  generate::EngineOptions options;
  options.profile = a.placement.profile;
  options.plan = a.placement.plan_options();
  options.overrides = a.placement.form_overrides();
  options.threads = a.threads;
  options.force = a.force;
  if (a.check_tensors) {  // before loading: a model with NaN weights would only print garbage
    const convert::ValueCheck check = convert::check_values(gguf::read_header(a.model), static_cast<unsigned>(a.threads));
    fmt::print(stderr, "skainet: {}\n", check.summary());
    check.throw_if_bad(a.model);
  }
  auto engine = generate::Engine::open(a.model, options);
  for (const auto& w : engine->plan.warnings) fmt::print(stderr, "skainet: warning: {}\n", plan::describe(w));

  const uint64_t seed = a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}();
  a.sampling.seed = seed;
  text::Sampler sampler(engine->tokenizer->vocab_size(), a.sampling, engine->plan.kv->ctx);
  generate::Generator gen = engine->generator(sampler);

  if (!a.no_display_prompt) {
    fmt::print("{}", a.prompt);
    std::fflush(stdout);
  }
  generate::Options run_options;
  run_options.max_tokens = a.n_predict;
  run_options.stop_at_eos = !a.ignore_eos;
  const generate::Stats s = gen.generate(a.prompt, run_options, [](std::string_view piece, int32_t) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  print_stats(*engine, s, seed);
  return 0;
}

}  // namespace

Subcommand add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text: load the model exactly as planned and stream tokens");
  cmd->add_option("-m,--model", a->model, "GGUF model")->required();  // a missing file is exit code 1, as in every command
  cmd->add_option("-p,--prompt", a->prompt, "prompt text")->required();
  cmd->add_option("-n,--n-predict", a->n_predict, "tokens to generate (-1: until end of text or a full context)");
  cmd->add_option("-t,--threads", a->threads, "Threads (default: the physical cores this process may use)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("-s,--seed", a->seed, "sampling seed (-1: random)");
  cmd->add_option("--temp", a->sampling.temperature, "temperature (0: greedy)");
  cmd->add_option("--top-k", a->sampling.top_k, "top-k (0: off)");
  cmd->add_option("--top-p", a->sampling.top_p, "top-p (1: off)");
  cmd->add_option("--min-p", a->sampling.min_p, "min-p (0: off)");
  cmd->add_option("--repeat-penalty", a->sampling.repeat_penalty, "repetition penalty (1: off)");
  cmd->add_option("--repeat-last-n", a->sampling.repeat_last_n, "tokens the penalty looks back over");
  cmd->add_flag("--no-display-prompt", a->no_display_prompt, "do not echo the prompt");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "keep generating past end of text");
  cmd->add_flag("--check-tensors", a->check_tensors, "decode every tensor first and refuse NaN or infinity");
  cmd->add_flag("--force", a->force, "load even when the plan exceeds the memory available now (MemAvailable)");
  a->placement.add_to(cmd);
  return {cmd, [a] { return run(*a); }};
}

}  // namespace skainet::cli
