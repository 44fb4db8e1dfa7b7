#include <regex>

#include <gtest/gtest.h>

#include "skainet/model/plan.hpp"

using namespace skainet;
using namespace skainet::plan;

namespace {

const std::string kStories = std::string(SKAINET_SHARED_MODELS) + "/stories260K.gguf";

MemoryPlan plan_stories(const placement::MemoryProfile& profile, PlanOptions opts = {},
                        const placement::FormOverrides& o = {}) {
  return make_plan(gguf::read_header(kStories), profile, placement::Platform::detect(), o, opts);
}

}  // namespace

TEST(Plan, StoriesDefaultMapsEveryTensor) {
  const MemoryPlan p = plan_stories(placement::MemoryProfile::preset("default"));
  ASSERT_EQ(p.tensors.size(), 48u);
  ASSERT_TRUE(p.model);
  EXPECT_EQ(p.model->layers, 5u);
  EXPECT_EQ(p.model->dim, 64u);
  EXPECT_EQ(p.model->heads, 8u);
  EXPECT_EQ(p.model->kv_heads, 4u);
  EXPECT_EQ(p.model->head_dim, 8u);
  EXPECT_EQ(p.model->ffn, 172u);
  EXPECT_EQ(p.model->vocab, 512u);
  EXPECT_EQ(p.model->ctx_train, 2048u);
  uint64_t file_bytes = 0;
  for (const auto& d : p.tensors) {
    EXPECT_EQ(d.spec.domain, MemoryDomain::MappedFile) << d.tensor;
    file_bytes += d.file_bytes;
  }
  EXPECT_EQ(p.totals.mapped, file_bytes);
  EXPECT_EQ(p.totals.heap + p.totals.pages, 0u);
  ASSERT_TRUE(p.kv);
  EXPECT_EQ(p.kv->n_ctx, 2048u);
  EXPECT_EQ(p.kv->bytes, 2ull * 5 * 2048 * (4 * 8) * 2) << "K and V, 5 layers, F16";
  EXPECT_EQ(p.totals.kv, p.kv->bytes);
  ASSERT_TRUE(p.decode && p.prefill);
  EXPECT_EQ(p.decode->tokens, 1u);
  EXPECT_EQ(p.prefill->tokens, 64u);
  EXPECT_EQ(p.totals.slab, std::max(p.decode->total(), p.prefill->total()));
  EXPECT_EQ(p.totals.resident(), p.totals.mapped + p.totals.kv + p.totals.slab);
  EXPECT_TRUE(p.fits);
  EXPECT_LT(p.header_bytes_read, p.file_size);
}

TEST(Plan, SlabBuffersAreSixtyFourByteMultiples) {
  PlanOptions opts;
  opts.n_ctx = 256;
  const MemoryPlan p = plan_stories(placement::MemoryProfile::preset("default"), opts);
  uint64_t sum = 0;
  for (const auto& b : p.decode->layer) {
    EXPECT_EQ(b.bytes % 64, 0u) << b.name;
    sum += b.bytes;
  }
  EXPECT_EQ(sum, p.decode->layer_bytes);
  // Attention scores for one token: 8 heads x 256 cells x 4 bytes.
  EXPECT_EQ(p.decode->layer[6].name, "attention scores/probs [heads, n, ctx]");  // softmax in place
  EXPECT_EQ(p.decode->layer[6].bytes, 8u * 256 * 4);
}

TEST(Plan, InMemoryHoldsEverythingInProcessMemory) {
  const MemoryPlan p = plan_stories(placement::MemoryProfile::preset("in-memory"));
  EXPECT_EQ(p.totals.mapped, 0u);
  EXPECT_EQ(p.totals.heap + p.totals.pages, p.totals.file);
}

TEST(Plan, BudgetDecidesFitsAndSuggestsWhatSaves) {
  PlanOptions opts;
  opts.k_type = opts.v_type = GgmlType::F32;
  opts.budget = 1 << 20;  // 1 MiB: the F32 KV cache of 2048 cells alone is 3.1 MiB
  const MemoryPlan p = plan_stories(placement::MemoryProfile::preset("default"), opts);
  EXPECT_FALSE(p.fits);
  ASSERT_FALSE(p.suggestions.empty());
  bool ctx = false, kv = false;
  for (const auto& s : p.suggestions) {
    EXPECT_GT(s.saves, 0u);
    if (s.kind == SuggestionKind::SmallerContext) ctx = true;
    if (s.kind == SuggestionKind::SmallerKvType) {
      kv = true;
      EXPECT_EQ(s.saves, p.kv->bytes / 2);
    }
  }
  EXPECT_TRUE(ctx && kv);
  opts.budget = uint64_t{1} << 30;
  EXPECT_TRUE(plan_stories(placement::MemoryProfile::preset("default"), opts).fits);
}

TEST(Plan, OverridesShowWhoDecided) {
  placement::FormOverrides o;
  o.per_tensor.push_back(placement::TensorOverride::parse("^output\\.weight$=q8_0,heap"));
  const MemoryPlan p = plan_stories(placement::MemoryProfile::preset("default"), {}, o);
  int overridden = 0;
  for (const auto& d : p.tensors)
    if (d.decided_by == placement::DecidedBy::PerTensorOverride) {
      ++overridden;
      EXPECT_EQ(d.tensor, "output.weight");
      EXPECT_EQ(d.held_type, GgmlType::Q8_0);
    }
  EXPECT_EQ(overridden, 1);
}

TEST(Plan, JsonRoundTripsIntoTheSameDecisions) {
  placement::FormOverrides o;
  o.uniform = placement::WeightForm::dense_in_memory();
  PlanOptions opts;
  opts.budget = 1 << 20;
  const MemoryPlan p = plan_stories(placement::MemoryProfile::preset("throughput"), opts, o);
  const MemoryPlan back = from_json(to_json(p));
  EXPECT_EQ(back, p);
  EXPECT_THROW(from_json("{\"file\": 3}"), InvalidArgument);

  // YaRN's hyper-parameters travel by name and number; a plan without them reads as no scaling.
  MemoryPlan yarn = p;
  yarn.model->rope_scaling = arch::RopeScaling::Yarn, yarn.model->rope_scale = 32.0f;
  yarn.model->yarn_orig_ctx = 4096, yarn.model->rope_attn_factor = 0.5f;
  const std::string text = to_json(yarn);
  EXPECT_NE(text.find("\"rope_scaling\": \"yarn\""), std::string::npos) << text.substr(0, 2000);
  EXPECT_EQ(from_json(text), yarn);
  EXPECT_THROW(from_json(std::regex_replace(text, std::regex("\"yarn\""), "\"longrope\"")), InvalidArgument);
}

TEST(Plan, TextLeadsWithTheVerdictThenOneLinePerLayer) {
  const MemoryPlan p = plan_stories(placement::MemoryProfile::preset("default"));
  const std::string text = render_text(p);
  const std::vector<std::string> summary = summary_lines(p);
  ASSERT_EQ(summary.size(), 5u);
  std::string head;
  for (const auto& line : summary) head += line;
  EXPECT_TRUE(text.starts_with(head)) << text;
  EXPECT_NE(text.find("  layer 0              9 tensors  177.5 KiB  (evictable 177.5 KiB)  mapped F32 x 9\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("blk.0.attn_q.weight"), std::string::npos) << "no per-tensor lines without --tensors";
  const std::string all = render_text(p, true);
  EXPECT_NE(all.find("    blk.0.attn_q.weight              F32   [64 x 64]            16.0 KiB  mapped from the file "
                     "(evictable): the kernel reads F32 in file order\n"),
            std::string::npos)
      << all;
}

// A vocabulary-only file has hyper-parameters but no tensors.
TEST(Plan, VocabularyOnlyFileHasNoModelSection) {
  const auto h = gguf::read_header(std::string(SKAINET_SHARED_MODELS) + "/vocab/ggml-vocab-llama-spm.gguf");
  const MemoryPlan p = make_plan(h, placement::MemoryProfile::preset("default"), placement::Platform::detect(), {}, {});
  EXPECT_FALSE(p.model);
  EXPECT_FALSE(p.kv);
  EXPECT_EQ(p.totals.resident(), 0u);
}

// `plan --slots N` / `serve --slots N`: each slot has its own KV cache, the slots share one batch's
// slabs and scratch, the weights are shared; the budget counts them all and the JSON carries the count.
TEST(Plan, SlotsMultiplyTheKvCacheAndShareOneBatch) {
  const auto profile = placement::MemoryProfile::preset("default");
  const MemoryPlan one = plan_stories(profile, {.n_ctx = 256});
  const MemoryPlan four = plan_stories(profile, {.n_ctx = 256, .slots = 4, .batch_slots = true});
  EXPECT_EQ(four.slots, 4u);
  EXPECT_FALSE(one.serves_batched());
  EXPECT_TRUE(four.serves_batched());
  EXPECT_EQ(four.kv, one.kv) << "kv_cache stays one slot's";
  EXPECT_EQ(four.totals.kv, 4 * one.totals.kv);
  EXPECT_EQ(four.totals.slab, four.batch->total());
  EXPECT_EQ(four.totals.scratch, four.batch_scratch.bytes);
  EXPECT_EQ(four.totals.mapped, one.totals.mapped);
  EXPECT_EQ(four.totals.resident() - one.totals.resident(),
            3 * one.totals.kv + (four.totals.slab + four.totals.scratch) - (one.totals.slab + one.totals.scratch));

  const uint64_t between = one.totals.resident() + (four.totals.resident() - one.totals.resident()) / 2;
  EXPECT_TRUE(plan_stories(profile, {.n_ctx = 256, .budget = between, .slots = 1}).fits);
  EXPECT_FALSE(plan_stories(profile, {.n_ctx = 256, .budget = between, .slots = 4, .batch_slots = true}).fits);
  // Slots that each run their own passes (a draft model's) carry their own slabs and scratch.
  const MemoryPlan apart = plan_stories(profile, {.n_ctx = 256, .slots = 4});
  EXPECT_EQ(apart.totals.slab, 4 * one.totals.slab);
  EXPECT_EQ(apart.totals.scratch, 4 * one.totals.scratch);
  EXPECT_NE(render_text(apart).find("each running its own passes"), std::string::npos);

  EXPECT_EQ(from_json(to_json(four)), four);
  EXPECT_THROW(plan_stories(profile, {.n_ctx = 256, .slots = 0}), InvalidArgument);
}

// `serve --cache-ram`: the prompt cache's bound is resident like the slots' caches (all of it may fill),
// so the budget counts it, and the text and JSON carry it.
TEST(Plan, PromptCacheBoundIsPricedInTheResidentTotal) {
  const auto profile = placement::MemoryProfile::preset("default");
  const MemoryPlan without = plan_stories(profile, {.n_ctx = 256, .slots = 2, .batch_slots = true});
  const uint64_t bound = uint64_t{3} << 20;
  const MemoryPlan with = plan_stories(profile, {.n_ctx = 256, .slots = 2, .batch_slots = true, .prompt_cache = bound});
  EXPECT_EQ(with.totals.prompt_cache, bound);
  EXPECT_EQ(with.totals.resident(), without.totals.resident() + bound);
  EXPECT_EQ(split(with).total(), with.totals.resident());
  EXPECT_TRUE(
      plan_stories(profile, {.n_ctx = 256, .budget = without.totals.resident(), .slots = 2, .batch_slots = true}).fits);
  EXPECT_FALSE(
      plan_stories(
          profile,
          {.n_ctx = 256, .budget = without.totals.resident(), .slots = 2, .batch_slots = true, .prompt_cache = bound})
          .fits);
  const std::string text = render_text(with);
  EXPECT_NE(text.find("+ prompt cache 3.0 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("prompts   up to 3.0 MiB in the prompt cache (--cache-ram)"), std::string::npos) << text;
  EXPECT_EQ(render_text(without).find("prompt cache"), std::string::npos);
  EXPECT_EQ(from_json(to_json(with)), with);
}

// A sequence's sizes are stated once, final: each slab the larger of decode's and prefill's (a prefill
// chunk of one token gives decode's), and a lone slot's totals count them.
TEST(Plan, SequencePlanHoldsTheLargerSlabsAndTheTotalsCountIt) {
  const auto profile = placement::MemoryProfile::preset("default");
  for (const uint32_t chunk : {1u, 64u}) {
    SCOPED_TRACE(chunk);
    const MemoryPlan p = plan_stories(profile, {.n_ctx = 256, .prefill_chunk = chunk});
    const std::optional<SequencePlan> s = p.sequence();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->kv, *p.kv);
    EXPECT_EQ(s->step_bytes, std::max(p.decode->step_bytes, p.prefill->step_bytes));
    EXPECT_EQ(s->layer_bytes, std::max(p.decode->layer_bytes, p.prefill->layer_bytes));
    EXPECT_EQ(s->slab_bytes(), std::max(p.decode->total(), p.prefill->total()));
    EXPECT_EQ(s->scratch_bytes, p.scratch.bytes);
    EXPECT_EQ(s->prefill_chunk, chunk);
    EXPECT_EQ(p.totals.kv, s->kv.bytes);
    EXPECT_EQ(p.totals.slab, s->slab_bytes());
    EXPECT_EQ(p.totals.scratch, s->scratch_bytes);
    EXPECT_EQ(from_json(to_json(p)).sequence(), s);
  }
  const auto vocab = gguf::read_header(std::string(SKAINET_SHARED_MODELS) + "/vocab/ggml-vocab-llama-spm.gguf");
  EXPECT_FALSE(make_plan(vocab, profile, placement::Platform::detect(), {}, {}).sequence()) << "no model, no sequence";
}

// A batched step over the slots (generate::Batch) is what several slots' totals count: by default one
// sequence's prefill chunk beside a decode row of every other slot; at one sequence and the chunk's
// rows it is the prefill slab itself, and it grows by each extra sequence's alignment and logits row.
TEST(Plan, BatchPricesItsRowsAndSequences) {
  const auto profile = placement::MemoryProfile::preset("default");
  const MemoryPlan one = plan_stories(profile, {.n_ctx = 256, .prefill_chunk = 16});
  ASSERT_TRUE(one.batched());
  EXPECT_EQ(*one.batch, *one.prefill) << "one slot: the batch is a prefill chunk";
  const MemoryPlan four = plan_stories(profile, {.n_ctx = 256, .prefill_chunk = 16, .slots = 4, .batch_slots = true});
  const std::optional<BatchPlan> b = four.batched();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->rows, 16u + 3u);
  EXPECT_EQ(b->sequences, 4u);
  EXPECT_EQ(b->step_bytes, four.batch->step_bytes);
  EXPECT_EQ(b->scratch_bytes, four.batch_scratch.bytes);
  EXPECT_EQ(four.totals.slab, b->slab_bytes()) << "the slots share the batch's slabs";
  const SlabPlan alone = estimate_slabs(*four.model, 19, 256);
  EXPECT_GT(b->step_bytes, alone.step_bytes) << "a logits row per sequence";
  EXPECT_GT(b->layer_bytes, alone.layer_bytes) << "the attention out of the batch, each sequence aligned";
  EXPECT_EQ(from_json(to_json(four)), four);
  EXPECT_NE(render_text(four).find("advanced together by one batch of 19 rows per step"), std::string::npos)
      << render_text(four);

  EXPECT_EQ(plan_stories(profile, {.n_ctx = 256, .slots = 4, .batch = 4}).batched()->rows, 4u);
  EXPECT_THROW(plan_stories(profile, {.n_ctx = 256, .slots = 4, .batch = 3}), InvalidArgument);
  EXPECT_THROW(estimate_slabs(*four.model, 2, 256, {.sequences = 3}), InvalidArgument);
}

// The matmul scratch is priced from the platform's kernels: the widest weight a matmul reads, at the
// prefill chunk (here a stand-in kernel that prepares F32 rows as k bytes each); two slots count the
// batch's, at its rows.
TEST(Plan, ScratchIsTheWidestMatmulAtThePrefillChunk) {
  placement::Platform platform = placement::Platform::detect();
  platform.matmul_scratch = [](GgmlType type, BlockOrder, int64_t rows, int64_t k) noexcept -> size_t {
    return type == GgmlType::F32 ? static_cast<size_t>(rows * k) : 0;
  };
  const auto header = gguf::read_header(kStories);
  const auto profile = placement::MemoryProfile::preset("default");
  const MemoryPlan p = make_plan(header, profile, platform, {}, {.n_ctx = 256, .slots = 2, .batch_slots = true});
  EXPECT_EQ(p.scratch.tensor, "blk.0.ffn_down.weight") << "k = ffn (172), the widest input";
  EXPECT_EQ(p.scratch.rows, p.prefill->tokens);
  EXPECT_EQ(p.scratch.bytes, uint64_t{172} * p.prefill->tokens);
  EXPECT_EQ(p.batch_scratch.bytes, uint64_t{172} * (p.prefill->tokens + 1));
  EXPECT_EQ(p.totals.scratch, p.batch_scratch.bytes);
  EXPECT_EQ(p.totals.resident(),
            p.totals.mapped + p.totals.heap + p.totals.pages + p.totals.kv + p.totals.slab + p.totals.scratch);
  EXPECT_NE(render_text(p).find("(matmul activation prepared once per call: blk.0.ffn_down.weight x " +
                                std::to_string(p.prefill->tokens) + " rows"),
            std::string::npos)
      << render_text(p);
  EXPECT_EQ(from_json(to_json(p)), p);
  // No kernel prepares x (the reference table): no scratch.
  platform.matmul_scratch = nullptr;
  EXPECT_EQ(make_plan(header, profile, platform, {}, {.n_ctx = 256}).totals.scratch, 0u);
}
