// `skainet run`: load exactly as planned and generate, streaming tokens to stdout and stats to stderr.
// Flag names follow llama.cpp's (-m -p -f -e -n -t -c -r --stop --temp --top-k --top-p --min-p
// --repeat-penalty -s -cnv -sys); `run -cnv` is `skainet chat`.
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cli.hpp"
#include "generation_args.hpp"

namespace skainet::cli {

void print_run_stats(const generate::Engine& e, const generate::Stats& s, uint64_t seed) {
  const plan::MemoryPlan& p = e.plan;
  fmt::print(stderr,
             "\n\nskainet: load {:.2f} s | prompt {} tokens, {:.1f} tokens/s | generated {} tokens, {:.1f} tokens/s | "
             "first token {:.0f} ms | stop: {}\n",
             e.load_seconds, s.prompt_tokens, s.prompt_tokens_per_second(), s.generated_tokens,
             s.decode_tokens_per_second(), s.first_token_seconds * 1000, generate::stop_reason_name(s.stop));
  fmt::print(
      stderr,
      "skainet: memory plan resident {} (mapped {}, heap {}, pages {}, kv {}, slab {}, scratch {}) | profile {} | seed {}\n",
      base::format_bytes(p.totals.resident()), base::format_bytes(p.totals.mapped), base::format_bytes(p.totals.heap),
      base::format_bytes(p.totals.pages), base::format_bytes(p.totals.kv), base::format_bytes(p.totals.slab),
      base::format_bytes(p.totals.scratch), p.profile, seed);
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  const memory::ExecutionContext::ScratchStats& scratch = e.sequence->ctx.scratch_stats();
  fmt::print(stderr,
             "skainet: step slab {} peak {} | layer slab peak {} | overflow {} in {} allocations | "
             "scratch peak {}{} | peak RSS {} ({} bytes)\n",
             base::format_bytes(s.step_slab_bytes), base::format_bytes(s.step_slab_peak),
             base::format_bytes(s.layer_slab_peak), base::format_bytes(s.overflow_bytes), s.overflow_count,
             base::format_bytes(scratch.peak),
             scratch.growths ? fmt::format(", grew {} times past the plan", scratch.growths) : std::string(),
             base::format_bytes(static_cast<uint64_t>(ru.ru_maxrss) * 1024),
             static_cast<uint64_t>(ru.ru_maxrss) * 1024);
  if (s.verify_steps > 0 || s.probes > 0)
    fmt::print(stderr,
               "skainet: speculative: drafted {} tokens in {} verifications, accepted {} ({:.1f}%); {} probes, {} "
               "hit; drafter {:.3f} s of {:.3f} s decoding\n",
               s.drafted_tokens, s.verify_steps, s.accepted_tokens, 100 * s.acceptance_rate(), s.probes, s.probe_hits,
               s.draft_seconds, s.decode_seconds);
}

std::unique_ptr<generate::Engine> open_engine(const GenerationArgs& a) {
  if (a.check_tensors) {  // before loading: a model with NaN weights would only print garbage
    const convert::ValueCheck check =
        convert::check_values(gguf::read_header(a.model), static_cast<unsigned>(a.threads));
    fmt::print(stderr, "skainet: {}\n", check.summary());
    check.throw_if_bad(a.model);
  }
  auto engine = generate::Engine::open(a.model, a.engine_options());
  for (const auto& w : engine->plan.warnings) fmt::print(stderr, "skainet: warning: {}\n", plan::describe(w));
  return engine;
}

namespace {

// --record-expert-stats: the run's routing counts, sized before the first step (none per step).
struct ExpertRecorder {
  std::string path;
  plan::ExpertStats stats;
  void start(generate::Engine& e, const std::string& model) {
    if (path.empty()) return;
    const arch::ModelShape& m = *e.plan.model;
    if (m.experts == 0)
      throw InvalidArgument(fmt::format("--record-expert-stats: {} is not a mixture of experts", model));
    stats = plan::ExpertStats::for_model(m, std::filesystem::path(model).filename().string());
    e.sequence->llama.count_experts(stats.routed);
  }
  // Every row through layer 0 counts once per expert it chose: tokens = that sum / experts used.
  void finish(generate::Engine& e) {
    if (path.empty()) return;
    e.sequence->llama.count_experts({});
    uint64_t first = 0;
    for (uint32_t x = 0; x < stats.experts; ++x) first += stats.routed[x];
    stats.tokens = first / stats.experts_used;
    const std::string text = stats.to_json() + "\n";
    base::AtomicFile out(path);
    out.write(text.data(), text.size());
    out.commit();
    fmt::print(stderr, "skainet: expert statistics of {} tokens written to {}\n", stats.tokens, path);
  }
};

int run(GenerationArgs& a, ExpertRecorder& recorder) {
  a.finish_parse();
  if (a.conversation) return run_chat(a);
  auto engine = open_engine(a);
  const uint64_t seed = a.resolve_seed();
  generate::Generator& gen = engine->sequence->sample_with(a.sampling);
  constrain_output(a, *engine, *engine->sequence);
  const generate::Speculation speculation = start_speculation(a, *engine, gen);
  recorder.start(*engine, a.model);

  if (!a.no_display_prompt) {
    fmt::print("{}", a.prompt);
    std::fflush(stdout);
  }
  generate::Options run_options;
  run_options.max_tokens = a.n_predict;
  run_options.stop_at_eos = !a.ignore_eos;
  run_options.stop_strings = a.stops;
  const generate::Stats s = gen.generate(a.prompt, run_options, [](std::string_view piece, int32_t) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  recorder.finish(*engine);
  print_run_stats(*engine, s, seed);
  return 0;
}

}  // namespace

Subcommand add_run(CLI::App& app) {
  auto a = std::make_shared<GenerationArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text: load the model exactly as planned and stream tokens");
  a->add_to(cmd, Command::Run);
  auto recorder = std::make_shared<ExpertRecorder>();
  cmd->add_option("--record-expert-stats", recorder->path,
                  "a mixture of experts: count how often each expert of each layer is routed over this run's prompt "
                  "and generation, and write the counts to this JSON file (atomically) for --expert-stats");
  return {cmd, [a, recorder] { return run(*a, *recorder); }};
}

}  // namespace skainet::cli
