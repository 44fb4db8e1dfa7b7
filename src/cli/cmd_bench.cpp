// `skainet bench`: llama-bench's protocol and output formats (md, json, csv; JSON records use
// llama-bench's field names), so tools that read llama-bench output read ours. Adds peak RSS.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "llama_compat.hpp"
#include "placement_args.hpp"
#include "skainet/model/engine.hpp"

namespace skainet::cli {
namespace {

struct BenchArgs {
  std::string model;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int repetitions = 5;
  int threads = static_cast<int>(base::default_threads());
  std::string output = "md";
  PlacementArgs placement;
  CompatFlags compat;
  bool force = false;
};

struct Result {
  std::string test;  // "pp512", "tg128"
  int32_t n_prompt = 0, n_gen = 0;
  std::vector<uint64_t> samples_ns;
  double avg_ns() const { return std::accumulate(samples_ns.begin(), samples_ns.end(), 0.0) / samples_ns.size(); }
  double stddev_ns() const { return stddev(samples_ns, 1.0); }
  std::vector<double> samples_ts() const {
    std::vector<double> ts;
    for (uint64_t ns : samples_ns) ts.push_back((n_prompt + n_gen) * 1e9 / ns);
    return ts;
  }
  double avg_ts() const { auto ts = samples_ts(); return std::accumulate(ts.begin(), ts.end(), 0.0) / ts.size(); }
  double stddev_ts() const { auto ts = samples_ts(); return stddev(ts, 1.0); }

  template <class T>
  static double stddev(const std::vector<T>& v, double) {
    if (v.size() < 2) return 0;
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
    double sq = 0;
    for (T x : v) sq += (x - mean) * (x - mean);
    return std::sqrt(sq / (v.size() - 1));
  }
};

uint64_t peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

// Deterministic pseudo-random prompt ids (llama-bench also feeds random tokens).
std::vector<int32_t> prompt_ids(int32_t n, int32_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& id : ids) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    id = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
  }
  return ids;
}

uint64_t time_ns(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

std::string dominant_type(const gguf::Header& h) {
  std::map<std::string, uint64_t> bytes;
  for (const auto& t : h.tensors)
    if (t.shape.size() == 2) bytes[std::string(type_name(t.type))] += t.bytes;
  std::string best = "F32";
  uint64_t most = 0;
  for (const auto& [name, b] : bytes)
    if (b > most) most = b, best = name;
  return best;
}

int run(const BenchArgs& a) {
  generate::EngineOptions options;
  options.profile = a.placement.profile;
  options.plan = a.placement.plan_options();
  if (!options.plan.n_ctx) options.plan.n_ctx = static_cast<uint32_t>(std::max(a.n_prompt + a.n_gen, 16));
  options.overrides = a.placement.form_overrides();
  options.threads = a.threads;
  options.progress = false;
  options.force = a.force;
  auto e = generate::Engine::open(a.model, options);
  generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
  const auto ids = prompt_ids(a.n_prompt, static_cast<int32_t>(e->plan.model->vocab));

  std::vector<Result> results;
  if (a.n_prompt > 0) {
    Result r{fmt::format("pp{}", a.n_prompt), a.n_prompt, 0, {}};
    gen.prefill(ids, 0);  // warm-up
    for (int i = 0; i < a.repetitions; ++i) r.samples_ns.push_back(time_ns([&] { gen.prefill(ids, 0); }));
    results.push_back(r);
  }
  if (a.n_gen > 0) {
    Result r{fmt::format("tg{}", a.n_gen), 0, a.n_gen, {}};
    auto generate_n = [&] {
      int32_t tok = e->tokenizer->bos() >= 0 ? e->tokenizer->bos() : 0;
      for (int32_t i = 0; i < a.n_gen; ++i) tok = gen.decode_step(tok, i);
    };
    generate_n();  // warm-up
    for (int i = 0; i < a.repetitions; ++i) r.samples_ns.push_back(time_ns(generate_n));
    results.push_back(r);
  }

  uint64_t params = 0;
  for (const auto& t : e->header.tensors) params += t.elements();
  const std::string model_type = fmt::format("{} {} {}", e->plan.model->architecture, human_count(params), dominant_type(e->header));
  const uint64_t size = e->plan.totals.file;
  const uint64_t rss = peak_rss_bytes();
  const std::string kv_type(type_name(e->plan.kv->type));

  if (a.output == "json") {
    nlohmann::json all = nlohmann::json::array();
    char when[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    for (const auto& r : results)
      all.push_back({{"build_commit", "skainet"}, {"build_number", 0}, {"cpu_info", placement::Platform::detect().isa_summary()},
                     {"backends", "CPU"}, {"model_filename", a.model}, {"model_type", model_type}, {"model_size", size},
                     {"model_n_params", params}, {"n_batch", e->plan.prefill->tokens}, {"n_ubatch", e->plan.prefill->tokens},
                     {"n_threads", a.threads}, {"type_k", kv_type}, {"type_v", kv_type}, {"n_gpu_layers", 0},
                     {"n_prompt", r.n_prompt}, {"n_gen", r.n_gen}, {"test_time", when},
                     {"avg_ns", static_cast<uint64_t>(r.avg_ns())}, {"stddev_ns", static_cast<uint64_t>(r.stddev_ns())},
                     {"avg_ts", r.avg_ts()}, {"stddev_ts", r.stddev_ts()}, {"samples_ns", r.samples_ns},
                     {"samples_ts", r.samples_ts()}, {"max_rss_bytes", rss}, {"profile", e->plan.profile}});
    fmt::print("{}\n", all.dump(2));
  } else if (a.output == "csv") {
    fmt::print("model_filename,model_type,model_size,model_n_params,n_threads,n_prompt,n_gen,avg_ns,stddev_ns,avg_ts,stddev_ts,max_rss_bytes\n");
    for (const auto& r : results)
      fmt::print("\"{}\",\"{}\",{},{},{},{},{},{:.0f},{:.0f},{:.6f},{:.6f},{}\n", a.model, model_type, size, params, a.threads,
                 r.n_prompt, r.n_gen, r.avg_ns(), r.stddev_ns(), r.avg_ts(), r.stddev_ts(), rss);
  } else {
    fmt::print("| model | size | params | backend | threads | test | t/s | peak RSS |\n");
    fmt::print("| ----- | ---: | -----: | ------- | ------: | ---: | --: | -------: |\n");
    for (const auto& r : results)
      fmt::print("| {} | {} | {} | CPU | {} | {} | {:.2f} ± {:.2f} | {} |\n", model_type, base::format_bytes(size),
                 human_count(params), a.threads, r.test, r.avg_ts(), r.stddev_ts(), base::format_bytes(rss));
  }
  return 0;
}

}  // namespace

Subcommand add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Prompt processing and generation speed, in llama-bench's style");
  add_model_option(cmd, a->model);  // a missing file is exit code 1, as in every command
  cmd->add_option("-p,--n-prompt", a->n_prompt, "prompt tokens (pp test; 0: skip)");
  cmd->add_option("-n,--n-gen", a->n_gen, "generated tokens (tg test; 0: skip)");
  cmd->add_option("-r,--repetitions", a->repetitions, "repetitions of each test")->check(CLI::Range(1, 1000));
  cmd->add_option("-t,--threads", a->threads, "Threads (default: the physical cores this process may use)")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--force", a->force, "load even when the plan exceeds the memory available now (MemAvailable)");
  cmd->add_option("-o,--output", a->output, "md | json | csv")->check(CLI::IsMember({"md", "json", "csv"}));
  a->placement.add_to(cmd);
  add_placement_compat(cmd, a->compat);
  cmd->parse_complete_callback([a] {
    require_model(a->model);
    apply_placement_compat(a->compat, a->placement);
  });
  return {cmd, [a] { return run(*a); }};
}

}  // namespace skainet::cli
