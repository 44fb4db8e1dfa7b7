// The recorded path without IREE: what the recording captures, what the module carries, and what
// export refuses before writing anything.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "skainet/model/convert.hpp"
#include "skainet/model/record.hpp"
#include "skainet/io/stablehlo.hpp"
#include "temp_dir.hpp"

namespace skainet::record {
namespace {

namespace fs = std::filesystem;
const fs::path kStories = SKAINET_SHARED_MODELS "/stories260K.gguf";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

plan::MemoryPlan plan_for(const fs::path& model, const placement::FormOverrides& overrides = {}) {
  plan::PlanOptions options;
  options.n_ctx = 32;
  return plan::make_plan(gguf::read_header(model), placement::MemoryProfile::preset("default"), export_platform(),
                         overrides, options);
}

struct Recorded {
  plan::MemoryPlan plan;
  std::vector<Tape> tapes;
  std::vector<ComputeGraph> graphs;
  EmittedModule module;
};

Recorded record(const fs::path& model, const placement::FormOverrides& overrides = {}) {
  Recorded r;
  r.plan = plan_for(model, overrides);
  SymbolicScope scope;
  const load::LoadedModel weights = symbolic_weights(r.plan);
  load::KvCacheStore kv = load::KvCacheStore::recorded(scope, *r.plan.kv);
  model::Transformer llama(*r.plan.model, model::TransformerWeights::bind(weights, *r.plan.model), kv, 0);
  r.tapes.push_back(
      record_entry(llama, weights, kv, scope, {.name = "prefill", .tokens = 6, .logits = model::Logits::All}));
  r.tapes.push_back(record_entry(llama, weights, kv, scope,
                                 {.name = "decode", .tokens = 1, .dynamic_position = true, .cache_in = true}));
  for (const Tape& t : r.tapes) r.graphs.push_back(ComputeGraph::from_tape(t));
  std::vector<const ComputeGraph*> fs;
  for (ComputeGraph& g : r.graphs) {
    LayoutAssignmentPass{}.run(g);
    fs.push_back(&g);
  }
  r.module = emit_module(fs);
  return r;
}

TEST(Record, TheModelRunsOnShapesOnly) {
  const Recorded r = record(kStories);
  const Tape& prefill = r.tapes[0];
  // Every layer's ops are on the tape (7 matmuls, 2 norms, 2 ropes, 2 cache writes, attention, 2 adds,
  // swiglu), plus the embedding, the final norm and the output matmul.
  const uint32_t layers = r.plan.model->layers;
  EXPECT_EQ(prefill.ops.size(), layers * 17u + 3u);
  size_t writes = 0;
  for (const TapeOp& op : prefill.ops) writes += op.kind == ops::OpKind::WriteRows;
  EXPECT_EQ(writes, 2u * layers);
  EXPECT_TRUE(prefill.ops.front().ids_are_tokens);  // the embedding reads the token argument
  // The weights were never read: they have no bytes to read.
  const load::LoadedModel weights = symbolic_weights(r.plan);
  for (const auto& [name, t] : weights.weights) {
    EXPECT_TRUE(t.storage().symbolic()) << name;
    EXPECT_THROW((void)t.bytes(), InvalidArgument) << name;
  }
}

TEST(Record, RecordingTwiceGivesByteIdenticalText) {
  const std::string a = record(kStories).module.text, b = record(kStories).module.text;
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("func.func @prefill(%arg0: tensor<6xi32>)"), std::string::npos);
  EXPECT_NE(a.find("func.func @decode(%arg0: tensor<1xi32>, %arg1: tensor<i32>"), std::string::npos);
}

// Every weight's decision (encoding, block order) is in skainet.tensor_layouts and in its parameter
// declaration; a per-tensor override is carried, not re-decided.
TEST(Record, EveryWeightCarriesThePlansDecision) {
  test::TempDir dir("record");
  const fs::path q4 = dir / "q4_0.gguf";
  convert::QuantizeOptions q;
  q.scheme = convert::parse_scheme("q4_0");
  convert::quantize(kStories, q4, q);
  placement::FormOverrides overrides;
  overrides.per_tensor.push_back(placement::TensorOverride::parse("blk\\.1\\.attn_q\\.weight=f32"));
  const Recorded r = record(q4, overrides);

  std::map<std::string, TensorLayout> layouts;
  for (const ComputeGraph& g : r.graphs) layouts.insert(g.layouts.begin(), g.layouts.end());
  ASSERT_EQ(layouts.size(), r.plan.tensors.size());
  bool saw_packed = false, saw_override = false;
  for (const placement::Decision& d : r.plan.tensors) {
    SCOPED_TRACE(d.tensor);
    ASSERT_TRUE(layouts.count(d.tensor));
    const TensorLayout& l = layouts.at(d.tensor);
    EXPECT_EQ(l.format, d.held_type);
    EXPECT_EQ(l.order, d.held_order);
    EXPECT_EQ(l.block_bytes, type_traits(d.held_type).block_bytes);
    saw_packed |= d.held_type == GgmlType::Q4_0;
    if (d.tensor == "blk.1.attn_q.weight") {
      saw_override = true;
      EXPECT_EQ(d.held_type, GgmlType::F32);
      EXPECT_EQ(d.decided_by, placement::DecidedBy::PerTensorOverride);
    }
    const Shape s = Shape::from_ggml(d.shape);
    const stablehlo::TensorType t = s.rank() == 2 ? stablehlo::raw_type(d.held_type, s[0], s[1])
                                                  : stablehlo::TensorType{{s[0]}, stablehlo::Elem::F32};
    EXPECT_NE(r.module.text.find(stablehlo::global_declaration(d.tensor, "model", d.tensor, t)), std::string::npos);
    EXPECT_NE(r.module.text.find(fmt::format("\"{}\" = {{format = \"{}\"", d.tensor, type_name(d.held_type))),
              std::string::npos);
  }
  EXPECT_TRUE(saw_packed);
  EXPECT_TRUE(saw_override);
}

// The pass records orders; it never permutes bytes, so an order the emitter cannot read is refused.
TEST(Record, LayoutAssignmentRefusesAnOrderTheEmitterCannotRead) {
  Recorded r = record(kStories);
  ComputeGraph& g = r.graphs[1];
  for (Node& n : g.nodes)
    if (n.kind == NodeKind::Parameter && n.name == "blk.0.ffn_up.weight") n.order = BlockOrder::Interleaved16;
  try {
    LayoutAssignmentPass{"llvm-cpu"}.run(g);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_up.weight"), std::string::npos) << e.what();
  }
  EXPECT_EQ(r.graphs[0].layouts.at("blk.0.ffn_up.weight").target, "llvm-cpu");
}

TEST(Record, ExportWritesTheModuleTheArchiveAndAReport) {
  test::TempDir dir("record");
  ExportOptions o;
  o.out_dir = dir / "out";
  o.plan.n_ctx = 32;
  o.seq_len = 4;
  o.progress = false;
  const ExportReport r = export_model(kStories, o);
  EXPECT_TRUE(fs::exists(dir / "out" / "model.mlir"));
  EXPECT_TRUE(fs::exists(dir / "out" / "model.irpa"));
  EXPECT_EQ(slurp(dir / "out" / "report.txt"), r.text());
  EXPECT_EQ(r.parameters, 48u);
  EXPECT_EQ(r.as_stored, 48u);
  EXPECT_TRUE(r.fallbacks.empty());
  ASSERT_EQ(r.signatures.size(), 2u);
  EXPECT_EQ(r.signatures[0].rfind("prefill(tokens: tensor<4xi32>) -> (logits: tensor<4x512xf32>", 0), 0u)
      << r.signatures[0];
  // The default form calls the engine's kernels: its flags fix the target (this CPU) and name the
  // plugin; the report says what the module holds at run time.
  EXPECT_NE(slurp(dir / "out" / "compile.flags").find("--iree-hal-local-target-device-backends=llvm-cpu\n"),
            std::string::npos);
  EXPECT_NE(slurp(dir / "out" / "run.flags").find("--executable_plugin="), std::string::npos);
  EXPECT_EQ(r.memory.parameters, r.parameter_bytes);
  EXPECT_EQ(r.memory.caches, 2u * 5 * 32 * 32 * 2);  // K and V: 5 layers x 32 cells x 32 wide, f16
  ASSERT_EQ(r.memory.functions.size(), 2u);
  EXPECT_GT(r.memory.functions[0].transient, r.memory.functions[1].transient);  // 4 tokens' values > 1's
  EXPECT_NE(r.text().find("memory at run time"), std::string::npos);
  // Nothing but the six files, and no temporaries.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir / "out")) files += e.is_regular_file();
  EXPECT_EQ(files, 6u);
}

TEST(Record, ThePortableFormLeavesTheTargetToTheCaller) {
  const std::vector<std::string> flags = compile_flags(KernelForm::StableHlo);
  for (const std::string& f : flags) EXPECT_EQ(f.find("--iree-hal-target-device"), std::string::npos) << f;
  EXPECT_NE(std::find(flags.begin(), flags.end(), "--iree-opt-const-expr-hoisting=false"), flags.end());
  EXPECT_FALSE(llvm_cpu_compile_flags(KernelForm::StableHlo).empty());  // the fusion of the dequantizations
  EXPECT_TRUE(llvm_cpu_compile_flags(KernelForm::Engine).empty());
  EXPECT_TRUE(run_flags(KernelForm::StableHlo).empty());
  EXPECT_EQ(parse_kernel_form("engine"), KernelForm::Engine);
  EXPECT_EQ(parse_kernel_form("stablehlo"), KernelForm::StableHlo);
  EXPECT_FALSE(parse_kernel_form("cuda"));
}

TEST(Record, ConvertedWeightsAreReportedAndRefusedForInPlaceGguf) {
  test::TempDir dir("record");
  ExportOptions o;
  o.out_dir = dir / "out";
  o.plan.n_ctx = 32;
  o.progress = false;
  o.overrides.per_tensor.push_back(placement::TensorOverride::parse("^output\\.weight$=q8_0"));
  o.params = ParamsMode::Gguf;
  EXPECT_THROW(export_model(kStories, o), InvalidArgument);
  EXPECT_FALSE(fs::exists(dir / "out"));  // refused before anything was written

  o.params = ParamsMode::Irpa;
  const ExportReport r = export_model(kStories, o);
  ASSERT_EQ(r.fallbacks.size(), 1u);
  EXPECT_EQ(r.fallbacks[0].tensor, "output.weight");
  EXPECT_EQ(r.fallbacks[0].carried_type, GgmlType::Q8_0);
  EXPECT_NE(r.text().find("output.weight: F32 -> Q8_0"), std::string::npos) << r.text();
}

TEST(Record, UnsupportedArchitectureIsRefusedBeforeWriting) {
  test::TempDir dir("record");
  ExportOptions o;
  o.out_dir = dir / "out";
  o.progress = false;
  EXPECT_ANY_THROW(export_model(SKAINET_SHARED_MODELS "/vocab/ggml-vocab-gpt-2.gguf", o));
  EXPECT_FALSE(fs::exists(dir / "out"));
}

TEST(Record, TheEagerContextIsUntouchedAfterRecording) {
  const plan::MemoryPlan p = plan_for(kStories);
  SymbolicScope scope;
  const load::LoadedModel weights = symbolic_weights(p);
  load::KvCacheStore kv = load::KvCacheStore::recorded(scope, *p.kv);
  model::Transformer llama(*p.model, model::TransformerWeights::bind(weights, *p.model), kv, 0);
  memory::ExecutionContext ctx(1);
  // Symbolic tensors reaching an eager context (no recorder) cannot run: reading them throws.
  const std::vector<int32_t> ids{1, 2};
  EXPECT_THROW(llama.forward(ctx, ids, 0), Error);
  EXPECT_EQ(ctx.recorder(), nullptr);
}

}  // namespace
}  // namespace skainet::record
