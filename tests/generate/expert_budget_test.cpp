// A budgeted mixture of experts end to end (docs/placement.md, "Experts"): routing statistics recorded
// by a run, a plan under about half the file pinning the hottest experts that fit, the loader making
// exactly those experts' pages anonymous, and the same output as without the budget.
#include <malloc.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "skainet/model/convert.hpp"
#include "skainet/model/engine.hpp"
#include "alloc_counter.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

// The process's anonymous resident memory (RssAnon of /proc/self/status), in bytes.
uint64_t anonymous_rss() {
  std::ifstream status("/proc/self/status");
  std::string key;
  uint64_t kib = 0;
  while (status >> key)
    if (key == "RssAnon:") {
      status >> kib;
      return kib * 1024;
    }
  return 0;
}

// Resident anonymous bytes inside [begin, end) of this process's address space: the Rss of the
// /proc/self/smaps entries there that no file backs (inode 0). Pinned experts are such entries carved
// out of the model's file mapping; a sanitizer's shadow and quarantine lie elsewhere, so this count is
// exact in every build.
uint64_t anonymous_rss_within(const std::byte* begin, const std::byte* end) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  uint64_t bytes = 0;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    unsigned long long inode = 0;
    char perms[8] = {}, offset[32] = {}, dev[16] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s %31s %15s %llu", &lo, &hi, perms, offset, dev, &inode) == 6) {
      inside = inode == 0 && lo >= reinterpret_cast<uintptr_t>(begin) && hi <= reinterpret_cast<uintptr_t>(end);
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      bytes += std::stoull(line.substr(4)) * 1024;
    }
  }
  return bytes;
}

fs::path synth_moe(const test::TempDir& dir) {
  convert::SynthOptions s;
  s.shape = *convert::find_preset("tiny");
  // Experts of 2048 rows: each expert's slice of a Q8_0 stack is 136 pages, so the stacks dominate
  // the file and the partial pages at slice edges are a small share.
  s.shape.experts = 8, s.shape.experts_used = 2, s.shape.expert_ffn = 2048, s.shape.head_dim = 64;
  s.arch = "qwen3moe";
  s.scheme = convert::parse_scheme("Q8_0");
  s.bigram = true;
  s.progress = false;
  const fs::path file = dir / "qwen3moe-budget.gguf";
  convert::synth(file, s);
  return file;
}

const std::vector<int32_t> kPrompt = {1, 40, 41, 42, 43, 44, 45, 46, 47};

generate::EngineOptions options(std::optional<uint64_t> budget, std::optional<plan::ExpertStats> stats) {
  generate::EngineOptions o;
  o.plan.n_ctx = 64;
  // The prompt is one prefill chunk, so the run touches the slabs the plan prices (a larger chunk's
  // slab would be priced but never touched, and RSS would fall short of the plan by it).
  o.plan.prefill_chunk = static_cast<uint32_t>(kPrompt.size());
  o.plan.budget = budget;
  o.plan.expert_stats = std::move(stats);
  o.threads = 2;
  o.progress = false;
  return o;
}

// Greedy tokens after the prompt; `routed`, when given, counts the run's routing.
std::vector<int32_t> generate_tokens(generate::Engine& e, std::span<uint64_t> routed = {}) {
  e.sequence->llama.count_experts(routed);
  generate::Generator& gen = e.sequence->sample_with({.temperature = 0.0f});
  std::vector<int32_t> out{gen.prefill(kPrompt, 0)};
  int64_t pos = static_cast<int64_t>(kPrompt.size());
  for (int i = 0; i < 12; ++i) out.push_back(gen.decode_step(out.back(), pos++));
  e.sequence->llama.count_experts({});
  return out;
}

}  // namespace

TEST(ExpertBudget, HottestExpertsPinnedWithinBudgetSameOutput) {
  test::TempDir dir("expert-budget");
  const fs::path file = synth_moe(dir);

  // The unbudgeted run: its output, and its routing as the calibration.
  std::vector<int32_t> unbudgeted;
  plan::ExpertStats stats;
  {
    auto e = generate::Engine::open(file, options(std::nullopt, std::nullopt));
    stats = plan::ExpertStats::for_model(*e->plan.model, file.filename().string());
    unbudgeted = generate_tokens(*e, stats.routed);
    uint64_t first = 0;
    for (uint32_t x = 0; x < stats.experts; ++x) first += stats.routed[x];
    stats.tokens = first / stats.experts_used;
    for (const auto& d : e->plan.tensors)
      for (const auto& s : d.experts) EXPECT_EQ(s.reason, placement::ExpertReason::NoBudget) << d.tensor;
  }
  EXPECT_EQ(stats.tokens, kPrompt.size() + 12);
  const plan::ExpertStats read = plan::ExpertStats::from_json(stats.to_json(), "stats.json");
  EXPECT_EQ(read.routed, stats.routed);

  const uint64_t budget = fs::file_size(file) / 2;
  // The first engine's freed heap goes back to the system, so the second one's allocations show.
  ::malloc_trim(0);
  const uint64_t before = anonymous_rss();
  auto e = generate::Engine::open(file, options(budget, read));
  const plan::MemoryPlan& p = e->plan;
  const plan::ResidentSplit split = plan::split(p);
  const uint64_t held = split.pinned + split.kv + split.slabs + split.scratch;
  EXPECT_LE(held, budget);
  EXPECT_TRUE(p.fits);

  // Some experts pinned, some not; every pinned one at least as hot as every evictable one of its layer.
  uint32_t pinned = 0, evictable = 0;
  for (const auto& d : p.tensors)
    for (const auto& s : d.experts) {
      (s.pinned ? pinned : evictable) += 1;
      for (const auto& o : d.experts)
        if (s.pinned && !o.pinned) {
          EXPECT_GE(s.routed, o.routed) << d.tensor << " experts " << s.expert << ", " << o.expert;
        }
    }
  EXPECT_GT(pinned, 0u);
  EXPECT_GT(evictable, 0u);
  EXPECT_GT(e->loaded.stats.pinned_expert_bytes, 0u);

  const std::vector<int32_t> budgeted = generate_tokens(*e);
  EXPECT_EQ(budgeted, unbudgeted);
  // Exactly the pinned experts' pages became anonymous inside the file mapping, and all are resident.
  const std::byte* mapped = e->loaded.mapping->data();
  EXPECT_EQ(anonymous_rss_within(mapped, mapped + e->loaded.mapping->size()), e->loaded.stats.pinned_expert_bytes);
  // The whole process's growth against the plan; a sanitizer's shadow memory and allocator
  // quarantine would count too, so only where malloc is the system's.
  if (!test::allocation_counter_available()) return;
  const uint64_t grew = anonymous_rss() - before;
  const double off = (static_cast<double>(grew) - static_cast<double>(held)) / static_cast<double>(held);
  EXPECT_LT(std::abs(off), 0.05) << fmt::format(
      "anonymous RSS grew {} bytes, the plan pins {} bytes (weights {}, kv {}, slabs {}, scratch {})", grew, held,
      split.pinned, split.kv, split.slabs, split.scratch);
}

TEST(ExpertBudget, StatisticsOfAnotherModelAreRefused) {
  test::TempDir dir("expert-stats-mismatch");
  const fs::path file = synth_moe(dir);
  plan::ExpertStats other;
  other.model = "other.gguf";
  other.layers = 3, other.experts = 8, other.experts_used = 2;
  other.routed.assign(24, 0);
  try {
    generate::Engine::open(file, options(std::nullopt, other));
    FAIL() << "statistics of a 3-layer model accepted";
  } catch (const InvalidArgument& err) {
    EXPECT_NE(std::string(err.what()).find("3 layers"), std::string::npos) << err.what();
  }
  EXPECT_THROW(plan::ExpertStats::from_json("{\"format\": \"skainet-expert-stats\", \"version\": 2}", "x.json"),
               InvalidArgument);
  EXPECT_THROW(plan::ExpertStats::from_json("not json", "x.json"), InvalidArgument);
}

// Without statistics every expert counts the same: index order across the layers, so each layer pins
// the same experts; the plan shows them compactly, explains one, and its JSON reads back the same.
TEST(ExpertBudget, WithoutStatisticsExpertsArePinnedInIndexOrder) {
  test::TempDir dir("expert-index-order");
  const fs::path file = synth_moe(dir);
  const gguf::Header header = gguf::read_header(file);
  const auto profile = placement::MemoryProfile::preset("default");
  const auto platform = placement::Platform::detect();
  plan::PlanOptions o = options(fs::file_size(file) / 2, std::nullopt).plan;
  const plan::MemoryPlan p = plan::make_plan(header, profile, platform, {}, o);
  std::vector<std::string> lines;
  const placement::Decision* stack = nullptr;
  for (const auto& d : p.tensors) {
    if (d.experts.empty()) continue;
    stack = &d;
    bool seen_evictable = false;
    for (const auto& s : d.experts) {
      EXPECT_LT(s.routed, 0.0);
      if (!s.pinned) seen_evictable = true;
      EXPECT_FALSE(s.pinned && seen_evictable)
          << d.tensor << " expert " << s.expert << " pinned after an evictable one";
      EXPECT_EQ(s.reason, s.pinned ? placement::ExpertReason::HotFits : placement::ExpertReason::OverBudget);
      EXPECT_LE(s.pinned_bytes, s.bytes);
    }
  }
  ASSERT_NE(stack, nullptr);
  ASSERT_TRUE(stack->experts.front().pinned);
  EXPECT_NE(plan::render_text(p).find("    experts 0-"), std::string::npos) << plan::render_text(p);
  const std::string why = placement::explain_expert(*stack, 0);
  EXPECT_NE(why.find("pinned: among the hottest experts that fit the budget"), std::string::npos) << why;
  EXPECT_NE(why.find("no --expert-stats"), std::string::npos) << why;
  EXPECT_THROW(placement::explain_expert(*stack, 8), InvalidArgument);
  const plan::MemoryPlan back = plan::from_json(plan::to_json(p));
  ASSERT_EQ(back.tensors.size(), p.tensors.size());
  for (size_t i = 0; i < p.tensors.size(); ++i) EXPECT_EQ(back.tensors[i], p.tensors[i]) << p.tensors[i].tensor;
  EXPECT_EQ(back.model, p.model);
  EXPECT_EQ(back.totals, p.totals);
  EXPECT_EQ(back.fits, p.fits);
  EXPECT_EQ(back.suggestions, p.suggestions);
  EXPECT_EQ(back.warnings, p.warnings);
  EXPECT_EQ(back.kv, p.kv);
  EXPECT_EQ(back.decode, p.decode);
  EXPECT_EQ(back.prefill, p.prefill);
  EXPECT_EQ(back.batch, p.batch);
  EXPECT_EQ(back.scratch, p.scratch);
  EXPECT_EQ(back, p);
  const auto ref = placement::parse_expert_ref("blk.1.ffn_up_exps.weight[7]");
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->first, "blk.1.ffn_up_exps.weight");
  EXPECT_EQ(ref->second, 7u);
  EXPECT_FALSE(placement::parse_expert_ref("blk.1.ffn_up_exps.weight[x]"));

  // No budget: the stacks stay mapped, every expert evictable.
  o.budget.reset();
  for (const auto& d : plan::make_plan(header, profile, platform, {}, o).tensors)
    for (const auto& s : d.experts) EXPECT_EQ(s.reason, placement::ExpertReason::NoBudget);
}
