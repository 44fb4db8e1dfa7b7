// The plan summed up (issue 28): the pinned / evictable split from the decisions themselves, the
// layers, the biggest consumers, the summary's five lines, the re-priced contexts and the SVG.
#include <gtest/gtest.h>

#include "skainet/model/plan.hpp"

using namespace skainet;
using namespace skainet::plan;

namespace {

const std::string kStories = std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf";

placement::Decision decision(std::string name, MemoryDomain domain, uint64_t bytes,
                             placement::PlacementReason reason = placement::PlacementReason::MappedFileBytes) {
  placement::Decision d;
  d.tensor = std::move(name);
  d.spec.domain = domain;
  d.spec.bytes = bytes;
  d.file_bytes = bytes;
  d.reason = reason;
  d.held_type = GgmlType::Q4_0;
  return d;
}

// Two layers and two tensors outside them; one layer copied, the other mapped.
MemoryPlan hand_plan() {
  using R = placement::PlacementReason;
  MemoryPlan p;
  p.file = "a&b.gguf";
  p.profile = "default";
  p.tensors = {decision("token_embd.weight", MemoryDomain::MappedFile, 1000),
               decision("blk.0.attn_q.weight", MemoryDomain::HostPages, 400, R::CopyRepacked),
               decision("blk.0.ffn_up.weight", MemoryDomain::HostPages, 800, R::CopyRepacked),
               decision("blk.1.attn_q.weight", MemoryDomain::MappedFile, 400),
               decision("blk.1.ffn_up.weight", MemoryDomain::MappedFile, 800),
               decision("blk.1.attn_norm.weight", MemoryDomain::HostHeap, 10, R::CopyAmidCopies),
               decision("output.weight", MemoryDomain::HostPages, 1500, R::CopyRepacked)};
  p.totals = {.file = 4910, .mapped = 2200, .heap = 10, .pages = 2700, .kv = 3000, .slab = 600, .scratch = 50};
  return p;
}

}  // namespace

TEST(Summary, SplitComesFromTheDomains) {
  const MemoryPlan p = hand_plan();
  const ResidentSplit s = split(p);
  EXPECT_EQ(s.pinned, 400u + 800 + 10 + 1500) << "pages and heap: copies";
  EXPECT_EQ(s.evictable, 1000u + 400 + 800) << "the mapping";
  EXPECT_EQ(s.pinned_tensors, 4u);
  EXPECT_EQ(s.evictable_tensors, 3u);
  EXPECT_EQ(s.kv, 3000u);
  EXPECT_EQ(s.slabs, 600u);
  EXPECT_EQ(s.scratch, 50u);
  EXPECT_EQ(s.total(), p.totals.resident());
}

// 2 × the weights one token multiplies: an expert stack at experts_used / experts, vectors never, the
// embedding only where no matmul weight is the output (tied embeddings).
TEST(Summary, MatmulOpsPerTokenCountTheWeightsATokenMultiplies) {
  MemoryPlan p;
  p.model.emplace();
  p.model->vocab = 100, p.model->experts = 4, p.model->experts_used = 1;
  const auto weight = [](std::string name, placement::TensorRole role, std::vector<uint64_t> shape) {
    placement::Decision d;
    d.tensor = std::move(name), d.role = role, d.shape = std::move(shape);
    return d;
  };
  using R = placement::TensorRole;
  p.tensors = {weight("token_embd.weight", R::Embedding, {8, 100}),
               weight("blk.0.attn_q.weight", R::MatmulWeight, {8, 8}), weight("blk.0.attn_norm.weight", R::Vector, {8}),
               weight("blk.0.ffn_gate_inp.weight", R::MatmulWeight, {8, 4}),
               weight("blk.0.ffn_up_exps.weight", R::MatmulWeight, {8, 16, 4})};
  EXPECT_EQ(matmul_ops_per_token(p), 2u * (800 + 64 + 32 + 8 * 16));
  // With an output matrix of its own, that one counts and the embedding (a lookup) does not.
  p.tensors.push_back(weight("output.weight", R::MatmulWeight, {8, 100}));
  EXPECT_EQ(matmul_ops_per_token(p), 2u * (64 + 32 + 8 * 16 + 800));
  p.tensors.front().shape = {8, 1000};
  EXPECT_EQ(matmul_ops_per_token(p), 2u * (64 + 32 + 8 * 16 + 800));
}

TEST(Summary, GroupsByLayerThenTheRest) {
  const std::vector<LayerGroup> g = group_by_layer(hand_plan());
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].name(), "layer 0");
  EXPECT_EQ(g[0].tensors, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(g[0].pinned, 1200u);
  EXPECT_EQ(g[0].evictable, 0u);
  EXPECT_EQ(g[0].forms, (std::vector<std::pair<std::string, uint32_t>>{{"repacked copy Q4_0", 2}}));
  EXPECT_EQ(g[1].name(), "layer 1");
  EXPECT_EQ(g[1].bytes, 1210u);
  EXPECT_EQ(g[1].evictable, 1200u);
  EXPECT_EQ(g[1].forms,
            (std::vector<std::pair<std::string, uint32_t>>{{"mapped Q4_0", 2}, {"small copy beside copies Q4_0", 1}}));
  EXPECT_FALSE(g[2].layer);
  EXPECT_EQ(g[2].name(), "outside the layers");
  EXPECT_EQ(g[2].tensors, (std::vector<size_t>{0, 6}));
}

TEST(Summary, BiggestConsumersAcrossLayersAndTheKvCache) {
  const std::vector<Consumer> c = biggest_consumers(hand_plan(), 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], (Consumer{"kv cache", 0, 3000}));
  EXPECT_EQ(c[1], (Consumer{"ffn_up.weight", 2, 1600}));
  EXPECT_EQ(c[2], (Consumer{"output.weight", 1, 1500}));
}

TEST(Summary, FiveLinesVerdictFirst) {
  MemoryPlan p = hand_plan();
  std::vector<std::string> lines = summary_lines(p);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "verdict   8.4 KiB resident; no budget given (--budget SIZE checks one)\n");
  EXPECT_EQ(lines[1],
            "resident  8.4 KiB = pinned 2.6 KiB + evictable 2.1 KiB + kv cache 2.9 KiB + slabs 600 B + scratch 50 B\n");
  EXPECT_TRUE(
      lines[2].starts_with("weights   pinned 2.6 KiB (4 tensors copied into memory) + evictable 2.1 KiB "
                           "(3 tensors mapped from the file"))
      << lines[2];
  EXPECT_EQ(lines[3], "biggest   kv cache 2.9 KiB, ffn_up.weight x 2 1.6 KiB, output.weight 1.5 KiB\n");
  EXPECT_TRUE(lines[4].starts_with("model     none")) << lines[4];

  p.budget = 8000;
  p.fits = false;
  EXPECT_EQ(summary_lines(p)[0], "verdict   does NOT fit the budget of 7.8 KiB: 8.4 KiB resident, over by 560 B\n");
  p.budget = 9000;
  p.fits = true;
  EXPECT_EQ(summary_lines(p)[0], "verdict   fits the budget of 8.8 KiB: 8.4 KiB resident, 440 B to spare\n");
  p.warnings.push_back({PlanWarningKind::ExceedsAvailableMemory, 8560, 8000});
  EXPECT_TRUE(summary_lines(p)[0].ends_with("; does NOT fit the memory available now, 7.8 KiB, by 560 B\n"))
      << summary_lines(p)[0];
}

TEST(Summary, RepricedContextsAndSlots) {
  const gguf::Header h = gguf::read_header(kStories);
  const auto profile = placement::MemoryProfile::preset("default");
  const auto platform = placement::Platform::detect();
  const MemoryPlan p = make_plan(h, profile, platform, {}, {.n_ctx = 300});
  const std::vector<uint32_t> steps = context_steps(p);
  EXPECT_EQ(steps, (std::vector<uint32_t>{128, 256, 300, 512, 1024, 2048})) << "powers of two and the plan's own";
  const std::vector<ResidentPoint> curve = resident_by_context(h, profile, platform, {}, {.n_ctx = 300}, steps, {1, 3});
  ASSERT_EQ(curve.size(), 12u);
  for (size_t i = 0; i < curve.size(); ++i) {
    if (i % steps.size() > 0) {
      EXPECT_GT(curve[i].resident, curve[i - 1].resident) << "more context, more memory";
      EXPECT_GT(curve[i].kv, curve[i - 1].kv);
    }
    if (i >= steps.size()) EXPECT_GT(curve[i].resident, curve[i - steps.size()].resident) << "more slots";
  }
  EXPECT_EQ(curve[2], (ResidentPoint{300, 1, p.totals.resident(), p.totals.kv})) << "the plan itself, re-priced";
  const MemoryPlan three = make_plan(h, profile, platform, {}, {.n_ctx = 1024, .slots = 3, .batch_slots = true});
  EXPECT_EQ(curve[steps.size() + 4].resident, three.totals.resident());
}

TEST(Summary, SvgIsStandaloneAndEscaped) {
  const MemoryPlan p = hand_plan();
  const std::string svg = render_svg(p, {{128, 1, 5000, 100}, {256, 1, 6000, 200}, {128, 2, 7000, 200}});
  EXPECT_TRUE(svg.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_NE(svg.find("a&amp;b.gguf"), std::string::npos) << "the file name is escaped";
  EXPECT_EQ(svg.find("a&b"), std::string::npos);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos) << "no external references";
  for (const char* label :
       {"pinned weights (copied into memory) 2.6 KiB", "evictable weights (mapped from the file)", "KV cache 2.9 KiB",
        "activation slabs", "matmul scratch", "1 slot", "2 slots", "Weights by layer"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  // Without a model there is nothing to re-price: the chart says so instead of drawing nothing.
  EXPECT_NE(render_svg(p, {}).find("no model"), std::string::npos);
}
