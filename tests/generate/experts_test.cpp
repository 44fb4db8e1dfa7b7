// Mixture-of-experts files end to end on synth's models (qwen3moe, Mixtral-style llama): the plan lists
// the expert stacks and prices the routed activations exactly, a prefill and decode steps stay inside
// the planned slabs and scratch, and a decode step allocates nothing.
#include <algorithm>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "alloc_counter.hpp"
#include "skainet/model/convert.hpp"
#include "skainet/model/engine.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

struct MoeCase {
  const char* arch;
  uint32_t experts, used;
  const char* type;
};

fs::path synth_moe(const test::TempDir& dir, const MoeCase& c) {
  convert::SynthOptions s;
  s.shape = *convert::find_preset("tiny");
  s.shape.experts = c.experts, s.shape.experts_used = c.used;
  if (std::string_view(c.arch) != "llama") s.shape.expert_ffn = 96, s.shape.head_dim = 32;
  s.arch = c.arch;
  s.scheme = convert::parse_scheme(c.type);
  s.bigram = true;
  s.progress = false;
  const fs::path file = dir / fmt::format("{}-{}-{}.gguf", c.arch, c.experts, c.type);
  convert::synth(file, s);
  return file;
}

std::unique_ptr<generate::Engine> open(const fs::path& file) {
  generate::EngineOptions o;
  o.plan.n_ctx = 64;
  o.threads = 2;
  o.progress = false;
  return generate::Engine::open(file, o);
}

}  // namespace

TEST(Experts, MoeFilesPlanLoadAndDecodeWithoutAllocating) {
  test::TempDir dir("experts");
  for (const MoeCase& c :
       {MoeCase{"qwen3moe", 8, 2, "Q8_0"}, MoeCase{"llama", 4, 2, "F32"}, MoeCase{"llama", 3, 3, "Q4_K_M"},
        MoeCase{"qwen3moe", 5, 1, "F32"}, MoeCase{"gpt-oss", 8, 2, "F32"}, MoeCase{"gpt-oss", 4, 2, "MXFP4_MOE"}}) {
    SCOPED_TRACE(fmt::format("{} {} of {} {}", c.arch, c.used, c.experts, c.type));
    auto e = open(synth_moe(dir, c));
    EXPECT_TRUE(e->plan.model->features.moe);
    EXPECT_EQ(e->plan.model->experts, c.experts);
    EXPECT_TRUE(std::any_of(e->plan.tensors.begin(), e->plan.tensors.end(),
                            [](const auto& d) { return d.tensor == "blk.1.ffn_down_exps.weight"; }));
    generate::Generator& gen = e->sequence->sample_with({.temperature = 0.0f});
    const std::vector<int32_t> prompt = {1, 40, 41, 42, 43, 44, 45};
    int32_t tok = gen.prefill(prompt, 0);
    int64_t pos = static_cast<int64_t>(prompt.size());
    for (int i = 0; i < 4; ++i) tok = gen.decode_step(tok, pos++);  // warm
    const uint64_t before = test::allocation_count();
    for (int i = 0; i < 16; ++i) tok = gen.decode_step(tok, pos++);
    if (test::allocation_counter_available())
      EXPECT_EQ(test::allocation_count() - before, 0u) << "heap allocations in 16 decode steps";
    EXPECT_EQ(gen.step_stats().total_overflow_count, 0u);
    EXPECT_EQ(e->sequence->llama.layer_stats().total_overflow_count, 0u) << "the layer slab was too small";
    EXPECT_EQ(e->sequence->ctx.scratch_stats().growths, 0u) << "the matmul scratch grew";
  }
}

// A decode step's layer slab peak stays within what the plan prices for one row at one cell (a bound:
// the groups of rows per expert depend on the routes, each group's buffers aligned on its own).
TEST(Experts, DecodeLayerSlabStaysWithinThePlansEstimate) {
  test::TempDir dir("experts-slab");
  for (const char* arch : {"qwen3moe", "gpt-oss"}) {
    SCOPED_TRACE(arch);
    auto e = open(synth_moe(dir, {arch, 6, 3, "F32"}));
    memory::ExecutionContext ctx(1);
    memory::ForwardScope step({.slab_bytes = e->plan.sequence()->step_bytes});
    const int32_t tok = 5;
    ctx.step(step, [&] { e->sequence->llama.forward(ctx, std::span(&tok, 1), 0); });
    const uint64_t planned = plan::estimate_slabs(*e->plan.model, 1, 1).layer_bytes;
    EXPECT_LE(e->sequence->llama.layer_stats().peak, planned);
    EXPECT_GE(e->sequence->llama.layer_stats().peak + 3 * 64 * 6 * 2, planned) << "the bound is loose";
  }
}
