// `skainet bench`: llama-bench's protocol and output formats (md, json, csv; JSON records use
// llama-bench's field names), so tools that read llama-bench output read ours. Adds peak RSS and the
// share of the machine's matrix peak each test reaches (kernels::matrix_peak).
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
#include "skainet/compute/kernel_ops.hpp"
#include "skainet/model/engine.hpp"

namespace skainet::cli {
namespace {

// -p, -n and -d take lists, as llama-bench's options do ("-d 0,512,2048", or the option repeated).
struct BenchArgs {
  std::string model;
  std::vector<int32_t> n_prompt{512};
  std::vector<int32_t> n_gen{128};
  std::vector<int32_t> n_depth{0};
  int repetitions = 5;
  int threads = static_cast<int>(base::default_threads());
  std::string output = "md";
  PlacementArgs placement;
  CompatFlags compat;
  bool force = false;

  int32_t most(const std::vector<int32_t>& v) const { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
  // llama-bench's context for a test is n_prompt + n_gen + n_depth; one plan covers the largest.
  uint32_t context_needed() const {
    return static_cast<uint32_t>(std::max(most(n_depth) + most(n_prompt) + most(n_gen), 16));
  }
};

// One test: a pp test (n_gen 0) or a tg test (n_prompt 0), timed after n_depth tokens already fill
// the KV cache; its name is llama-bench's ("pp512", "tg128 @ d2048").
struct Result {
  int32_t n_prompt = 0, n_gen = 0, n_depth = 0;
  std::vector<uint64_t> samples_ns;
  std::string test() const {
    const std::string base = n_prompt > 0 ? fmt::format("pp{}", n_prompt) : fmt::format("tg{}", n_gen);
    return n_depth > 0 ? fmt::format("{} @ d{}", base, n_depth) : base;
  }
  double avg_ns() const { return std::accumulate(samples_ns.begin(), samples_ns.end(), 0.0) / samples_ns.size(); }
  double stddev_ns() const { return stddev(samples_ns); }
  std::vector<double> samples_ts() const {
    std::vector<double> ts;
    for (uint64_t ns : samples_ns) ts.push_back((n_prompt + n_gen) * 1e9 / ns);
    return ts;
  }
  double avg_ts() const {
    const auto ts = samples_ts();
    return std::accumulate(ts.begin(), ts.end(), 0.0) / ts.size();
  }
  double stddev_ts() const { return stddev(samples_ts()); }

  template <class T>
  static double stddev(const std::vector<T>& v) {
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
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
}

// The type holding most of the 2-D weights' bytes: the model's name in the table, and the arithmetic
// of its matrix peak.
GgmlType dominant_type(const gguf::Header& h) {
  std::map<GgmlType, uint64_t> bytes;
  for (const auto& t : h.tensors)
    if (t.shape.size() == 2) bytes[t.type] += t.bytes;
  GgmlType best = GgmlType::F32;
  uint64_t most = 0;
  for (const auto& [type, b] : bytes)
    if (b > most) most = b, best = type;
  return best;
}

// Every test at every depth, in llama-bench's order: per depth, the pp tests, then the tg tests. The
// depth's tokens are prefilled once, untimed: the tests write only the cells from the depth on, so
// the cells before it stay as filled for every repetition.
std::vector<Result> measure(const BenchArgs& a, generate::Engine& e) {
  generate::Generator& gen = e.sequence->sample_with({.temperature = 0.0f});
  const auto vocab = static_cast<int32_t>(e.plan.model->vocab);
  const int32_t first = e.tokenizer->bos() >= 0 ? e.tokenizer->bos() : 0;
  std::vector<Result> results;
  for (const int32_t depth : a.n_depth) {
    if (depth > 0) gen.prefill(prompt_ids(depth, vocab), 0);
    for (const int32_t n : a.n_prompt) {
      if (n <= 0) continue;
      const auto ids = prompt_ids(n, vocab);
      Result r{n, 0, depth, {}};
      gen.prefill(ids, depth);  // warm-up
      for (int i = 0; i < a.repetitions; ++i) r.samples_ns.push_back(time_ns([&] { gen.prefill(ids, depth); }));
      results.push_back(r);
    }
    for (const int32_t n : a.n_gen) {
      if (n <= 0) continue;
      Result r{0, n, depth, {}};
      auto generate_n = [&] {
        int32_t tok = first;
        for (int32_t i = 0; i < n; ++i) tok = gen.decode_step(tok, depth + i);
      };
      generate_n();  // warm-up
      for (int i = 0; i < a.repetitions; ++i) r.samples_ns.push_back(time_ns(generate_n));
      results.push_back(r);
    }
  }
  return results;
}

// What every output row repeats.
struct BenchInfo {
  std::string model_type, type_k, type_v;
  uint64_t params = 0, size = 0, rss = 0;
  uint64_t ops_per_token = 0;  // plan::matmul_ops_per_token
  kernels::MatrixPeak peak;
  // The share of the matrix peak `tokens_per_second` reaches (0 when the clock is unknown).
  double peak_fraction(double tokens_per_second) const {
    const double peak_ops = peak.ops_per_second();
    return peak_ops > 0 ? tokens_per_second * static_cast<double>(ops_per_token) / peak_ops : 0;
  }
};

void print_json(const BenchArgs& a, const generate::Engine& e, const BenchInfo& b, const std::vector<Result>& results) {
  nlohmann::json all = nlohmann::json::array();
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  for (const auto& r : results)
    all.push_back({{"build_commit", "skainet"},
                   {"build_number", 0},
                   {"cpu_info", placement::Platform::detect().isa_summary()},
                   {"backends", "CPU"},
                   {"model_filename", a.model},
                   {"model_type", b.model_type},
                   {"model_size", b.size},
                   {"model_n_params", b.params},
                   {"n_batch", e.plan.prefill->tokens},
                   {"n_ubatch", e.plan.prefill->tokens},
                   {"n_threads", a.threads},
                   {"type_k", b.type_k},
                   {"type_v", b.type_v},
                   {"n_gpu_layers", 0},
                   {"n_prompt", r.n_prompt},
                   {"n_gen", r.n_gen},
                   {"n_depth", r.n_depth},
                   {"test_time", when},
                   {"avg_ns", static_cast<uint64_t>(r.avg_ns())},
                   {"stddev_ns", static_cast<uint64_t>(r.stddev_ns())},
                   {"avg_ts", r.avg_ts()},
                   {"stddev_ts", r.stddev_ts()},
                   {"samples_ns", r.samples_ns},
                   {"samples_ts", r.samples_ts()},
                   {"max_rss_bytes", b.rss},
                   {"matmul_ops_per_token", b.ops_per_token},
                   {"matrix_unit", b.peak.unit.name},
                   {"matrix_peak_ops", b.peak.ops_per_second()},
                   {"peak_fraction", b.peak_fraction(r.avg_ts())},
                   {"profile", e.plan.profile}});
  fmt::print("{}\n", all.dump(2));
}

void print_csv(const BenchArgs& a, const BenchInfo& b, const std::vector<Result>& results) {
  fmt::print(
      "model_filename,model_type,model_size,model_n_params,n_threads,n_prompt,n_gen,n_depth,"
      "avg_ns,stddev_ns,avg_ts,stddev_ts,max_rss_bytes,peak_fraction\n");
  for (const auto& r : results)
    fmt::print("\"{}\",\"{}\",{},{},{},{},{},{},{:.0f},{:.0f},{:.6f},{:.6f},{},{:.6f}\n", a.model, b.model_type, b.size,
               b.params, a.threads, r.n_prompt, r.n_gen, r.n_depth, r.avg_ns(), r.stddev_ns(), r.avg_ts(),
               r.stddev_ts(), b.rss, b.peak_fraction(r.avg_ts()));
}

void print_md(const BenchArgs& a, const BenchInfo& b, const std::vector<Result>& results) {
  fmt::print("| model | size | params | backend | threads | test | t/s | of peak | peak RSS |\n");
  fmt::print("| ----- | ---: | -----: | ------- | ------: | ---: | --: | ------: | -------: |\n");
  const bool known = b.peak.ops_per_second() > 0;
  for (const auto& r : results)
    fmt::print("| {} | {} | {} | CPU | {} | {} | {:.2f} ± {:.2f} | {} | {} |\n", b.model_type,
               base::format_bytes(b.size), human_count(b.params), a.threads, r.test(), r.avg_ts(), r.stddev_ts(),
               known ? fmt::format("{:.1f}%", 100 * b.peak_fraction(r.avg_ts())) : "?", base::format_bytes(b.rss));
  // How the peak column was computed, so a reader can check it (llama-bench ends with its build line).
  const std::string clock =
      known ? fmt::format("{:.2f} GHz = {:.0f} Gop/s", b.peak.clock_hz / 1e9, b.peak.ops_per_second() / 1e9)
            : std::string("an unknown clock");
  const auto ops = static_cast<double>(b.ops_per_token);
  const std::string per_token =
      ops >= 1e9 ? fmt::format("{:.2f} Gop", ops / 1e9) : fmt::format("{:.2f} Mop", ops / 1e6);
  fmt::print("\nof peak: {} a token (2 × the weights it multiplies) against {} op/cycle ({}) × {} cores × {}\n",
             per_token, b.peak.unit.ops_per_cycle, b.peak.unit.name, b.peak.cores, clock);
}

int run(const BenchArgs& a) {
  generate::EngineOptions options;
  options.profile = a.placement.profile;
  options.plan = a.placement.plan_options();
  if (!options.plan.n_ctx) options.plan.n_ctx = a.context_needed();
  options.overrides = a.placement.form_overrides();
  options.threads = a.threads;
  options.progress = false;
  options.force = a.force;
  auto e = generate::Engine::open(a.model, options);
  const std::vector<Result> results = measure(a, *e);

  BenchInfo b;
  for (const auto& t : e->header.tensors) b.params += t.elements();
  const GgmlType dominant = dominant_type(e->header);
  b.model_type = fmt::format("{} {} {}", e->plan.model->architecture, human_count(b.params), type_name(dominant));
  b.ops_per_token = plan::matmul_ops_per_token(e->plan);
  b.peak =
      kernels::matrix_peak(kernels::best_level(), kernels::arithmetic_of(dominant), static_cast<unsigned>(a.threads));
  b.size = e->plan.totals.file;
  b.rss = peak_rss_bytes();
  b.type_k = type_name(e->plan.kv->k_type);
  b.type_v = type_name(e->plan.kv->v_type);
  if (a.output == "json")
    print_json(a, *e, b, results);
  else if (a.output == "csv")
    print_csv(a, b, results);
  else
    print_md(a, b, results);
  return 0;
}

}  // namespace

Subcommand add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Prompt processing and generation speed, in llama-bench's style");
  add_model_option(cmd, a->model);  // a missing file is exit code 1, as in every command
  cmd->add_option("-p,--n-prompt", a->n_prompt, "prompt tokens, a list (pp tests; 0: skip)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--n-gen", a->n_gen, "generated tokens, a list (tg tests; 0: skip)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-d,--n-depth", a->n_depth, "tokens already in the KV cache before each test, a list")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
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
    const uint32_t needed = a->context_needed();
    if (a->placement.n_ctx && a->placement.n_ctx < needed)
      throw CLI::ValidationError("-c,--ctx", fmt::format("{} cells cannot hold the deepest test: depth {} + {} prompt "
                                                         "+ {} generated tokens need {}",
                                                         a->placement.n_ctx, a->most(a->n_depth), a->most(a->n_prompt),
                                                         a->most(a->n_gen), needed));
  });
  return {cmd, [a] { return run(*a); }};
}

}  // namespace skainet::cli
