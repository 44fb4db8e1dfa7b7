// The StableHLO rules of the ops that Gemma 2/3, Llama 3.1, Phi-3 and gpt-oss add (GeGLU, soft-capping,
// RoPE frequency factors, attention's sliding window, capped scores and sinks), on their own:
// a small program of them is recorded op for op, emitted, compiled by iree-compile and run by
// iree-run-module with its weights in a GGUF, and compared with the same ops run eagerly. Once with
// the positions static and once with the position a runtime argument (the decode form), each in both
// RoPE layouts. Missing IREE tools fail the test (never skip).
//
// Bound: 1e-4 absolute on values of order 1 (IREE's tanh, cos and exp against libm's, in f32;
// measured about 1e-6).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "iree_tools.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/compute/ops.hpp"
#include "skainet/model/record.hpp"
#include "temp_dir.hpp"

namespace skainet::record {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kTokens = 3, kHeads = 4, kKvHeads = 2, kHeadDim = 8, kCells = 10, kPosition = 5;

struct Weight {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

std::vector<Weight> weights() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.5f, 1.5f), factor(1.0f, 6.0f);
  std::vector<Weight> w = {{"q", Shape{kTokens, kHeads * kHeadDim}, {}},  {"k", Shape{kCells, kKvHeads * kHeadDim}, {}},
                           {"v", Shape{kCells, kKvHeads * kHeadDim}, {}}, {"up", Shape{kTokens, kHeads * kHeadDim}, {}},
                           {"rope_freqs", Shape{kHeadDim / 2}, {}},       {"sinks", Shape{kHeads}, {}}};
  for (Weight& x : w) {
    x.values.resize(static_cast<size_t>(x.shape.numel()));
    for (float& v : x.values) v = x.name == "rope_freqs" ? factor(rng) : dist(rng);
  }
  return w;
}

// The program: q roped (with frequency factors) attends over k and v with a window, capped scores
// and a sink per head (of the scores' size, so that they weigh); the result goes through GeGLU with
// `up` and a final soft-cap.
Tensor program(memory::ExecutionContext& ctx, const std::map<std::string, Tensor>& w, int64_t pos, bool neox) {
  const Tensor q0 = ops::convert(ctx, w.at("q"), GgmlType::F32);
  const Tensor q = ops::rope(ctx, q0.reshape(Shape{kTokens, kHeads, kHeadDim}), pos,
                             {.base = 10000.0f, .neox = neox, .freq_scale = 0.5f}, w.at("rope_freqs"));
  const Tensor k = ops::convert(ctx, w.at("k"), GgmlType::F32), v = ops::convert(ctx, w.at("v"), GgmlType::F32);
  const Tensor a = ops::attention(ctx, q.reshape(Shape{kTokens, kHeads * kHeadDim}), k, v,
                                  {.heads = kHeads,
                                   .kv_heads = kKvHeads,
                                   .head_dim = kHeadDim,
                                   .scale = 0.7f,
                                   .offset = pos,
                                   .window = 3,
                                   .softcap = 1.25f},
                                  w.at("sinks"));
  const Tensor g = ops::geglu(ctx, a, ops::convert(ctx, w.at("up"), GgmlType::F32));
  return ops::softcap(ctx, g, 0.8f);
}

// Appends every op to a tape, as the engine's recorder does (src/record/tape.cpp).
class Recorder final : public ops::Recorder {
 public:
  explicit Recorder(Tape& tape) : tape_(tape) {}
  void record(const ops::OpCall& call) override {
    TapeOp op{.kind = call.kind, .output = TensorRef::of(call.output), .attrs = call.attrs};
    for (const Tensor* t : call.inputs) op.inputs.push_back(TensorRef::of(*t));
    const uint64_t id = call.output.storage().id();
    if (!tape_.sources.count(id)) tape_.sources[id] = Source{.shape = call.output.shape(), .type = call.output.type()};
    tape_.ops.push_back(std::move(op));
  }

 private:
  Tape& tape_;
};

// A dynamic-position entry is recorded at position 0: its op positions are relative to the argument.
Tape record_program(const std::string& name, bool dynamic, bool neox) {
  Tape tape;
  tape.entry = {.name = name, .tokens = kTokens, .dynamic_position = dynamic, .logits = model::Logits::All};
  tape.kv = plan::KvCachePlan{
      .k_type = GgmlType::F32, .v_type = GgmlType::F32, .layers = 1, .n_ctx = 1, .kv_heads = 1, .head_dim = 1};
  SymbolicScope scope;
  std::map<std::string, Tensor> w;
  for (const Weight& x : weights()) {
    Tensor t(Storage::symbolic(contiguous_bytes(x.shape, GgmlType::F32), x.name), x.shape, GgmlType::F32);
    tape.sources[t.storage().id()] = Source{.kind = SourceKind::Weight, .name = x.name, .shape = x.shape};
    w.emplace(x.name, std::move(t));
  }
  memory::ExecutionContext ctx(1);
  Recorder recorder(tape);
  auto recording = ctx.record_with(recorder, scope);
  tape.result = TensorRef::of(program(ctx, w, dynamic ? 0 : kPosition, neox));
  return tape;
}

std::vector<float> eager(bool neox) {
  memory::ExecutionContext ctx(1, kernels::reference_table());
  std::vector<Weight> ws = weights();
  std::map<std::string, Tensor> w;
  for (Weight& x : ws)
    w.emplace(x.name,
              Tensor(Storage::borrow(x.values.data(), x.values.size() * 4, false, x.name), x.shape, GgmlType::F32));
  const Tensor out = program(ctx, w, kPosition, neox);
  std::vector<float> v(static_cast<size_t>(out.numel()));
  std::memcpy(v.data(), out.raw(), v.size() * 4);
  return v;
}

TEST(RecordedFamilyOps, GegluSoftcapRopeFactorsAndWindowedAttentionWithSinksEqualTheEagerOps) {
  const fs::path bin = SKAINET_IREE_BIN;
  for (const char* tool : {"iree-compile", "iree-run-module"})
    ASSERT_TRUE(fs::exists(bin / tool)) << tool << " not found in " << bin.string()
                                        << " (scripts/setup.sh installs it)";
  test::TempDir dir("record-family-ops");

  gguf::Writer writer(dir / "weights.gguf");
  const std::vector<Weight> ws = weights();
  for (const Weight& x : ws) {
    std::vector<uint64_t> ggml_shape;
    for (int i = x.shape.rank() - 1; i >= 0; --i) ggml_shape.push_back(static_cast<uint64_t>(x.shape[i]));
    writer.add_tensor(x.name, ggml_shape, GgmlType::F32);
  }
  writer.write([&](size_t i, std::span<std::byte> out) { std::memcpy(out.data(), ws[i].values.data(), out.size()); });

  struct Entry {
    std::string name;
    bool dynamic, neox;
  };
  const std::vector<Entry> entries = {{"static_normal", false, false},
                                      {"static_neox", false, true},
                                      {"dynamic_normal", true, false},
                                      {"dynamic_neox", true, true}};
  std::vector<Tape> tapes;
  std::vector<ComputeGraph> graphs;
  for (const Entry& e : entries) tapes.push_back(record_program(e.name, e.dynamic, e.neox));
  for (const Tape& t : tapes) graphs.push_back(ComputeGraph::from_tape(t));
  std::vector<const ComputeGraph*> functions;
  for (ComputeGraph& g : graphs) {
    LayoutAssignmentPass{}.run(g);
    functions.push_back(&g);
  }
  std::ofstream(dir / "m.mlir") << emit_module(functions).text;

  const auto [status, log] = test::run_command(
      fmt::format("'{}' '{}' --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu "
                  "--iree-llvmcpu-target-cpu=host -o '{}'",
                  (bin / "iree-compile").string(), (dir / "m.mlir").string(), (dir / "m.vmfb").string()),
      dir / "compile.log");
  ASSERT_EQ(status, 0) << log;

  for (const Entry& e : entries) {
    SCOPED_TRACE(e.name);
    const fs::path out = dir / (e.name + ".npy");
    std::string cmd = fmt::format(
        "'{}' --device=local-task --module='{}' --parameters=model='{}' --function={} "
        "--input='{}xi32=0,0,0'",
        (bin / "iree-run-module").string(), (dir / "m.vmfb").string(), (dir / "weights.gguf").string(), e.name,
        kTokens);
    if (e.dynamic) cmd += fmt::format(" --input='i32={}'", kPosition);
    cmd += fmt::format(" --output=@'{}' --output=@'{}' --output=@'{}'", out.string(), (dir / "k.npy").string(),
                       (dir / "v.npy").string());
    const auto [run_status, run_log] = test::run_command(cmd, dir / (e.name + ".log"));
    ASSERT_EQ(run_status, 0) << run_log;
    std::vector<int64_t> shape;
    const std::vector<float> got = test::read_npy_f32(out, shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{kTokens, kHeads * kHeadDim}));
    const std::vector<float> want = eager(e.neox);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    EXPECT_LT(worst, 1e-4);
  }
}

}  // namespace
}  // namespace skainet::record
