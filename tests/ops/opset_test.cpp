// The op list (ops.hpp) and the recording seam (opset.hpp): each op hands its call, with its attributes in
// their named fields, to an installed recorder instead of running its kernel.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "skainet/compute/ops.hpp"
#include "skainet/compute/opset.hpp"

using namespace skainet;

namespace {

// Symbolic storage (shapes, no bytes), as a recording's values are.
class SymbolicScope final : public memory::Scope {
 public:
  memory::ScopeKind kind() const noexcept override { return memory::ScopeKind::Ambient; }
  Tensor allocate(const Shape& shape, GgmlType type, std::string_view origin) override {
    return Tensor(Storage::symbolic(contiguous_bytes(shape, type), origin), shape, type);
  }
};

struct Recorded {
  ops::OpKind kind;
  size_t inputs;
  ops::OpAttributes attrs;
};

class ListRecorder final : public ops::Recorder {
 public:
  void record(const ops::OpCall& call) override { calls.push_back({call.kind, call.inputs.size(), call.attrs}); }
  std::vector<Recorded> calls;
};

}  // namespace

TEST(Opset, TheListNamesEveryOpOnceAsOpsSpellsIt) {
  std::set<std::string_view> names;
  for (const ops::OpInfo& op : ops::kOps) {
    EXPECT_TRUE(names.insert(op.name).second) << op.name;
    EXPECT_LE(op.min_inputs, op.max_inputs) << op.name;
  }
  EXPECT_EQ(ops::kOps.size(), static_cast<size_t>(ops::OpKind::MatmulExperts) + 1);  // the last row
  EXPECT_EQ(ops::op_kind_name(ops::OpKind::Softcap), "softcap");
  EXPECT_EQ(ops::op_kind_name(ops::OpKind::RmsNorm), "rms_norm");
  EXPECT_EQ(ops::op_kind_name(ops::OpKind::GatherRows), "gather_rows");
  EXPECT_TRUE(ops::takes_inputs(ops::OpKind::Rope, 1));
  EXPECT_TRUE(ops::takes_inputs(ops::OpKind::Rope, 2));
  EXPECT_FALSE(ops::takes_inputs(ops::OpKind::Rope, 3));
  EXPECT_FALSE(ops::takes_inputs(ops::OpKind::Matmul, 1));
}

// Scale's multiplier and softcap's cap arrive in fields of their own; the recorded ops run no kernel
// (their symbolic inputs have no bytes to read).
TEST(Opset, OpsRecordTheirAttributesInNamedFields) {
  memory::ExecutionContext ctx(1);
  SymbolicScope symbolic;
  ListRecorder recorder;
  {
    auto recording = ctx.record_with(recorder, symbolic);
    const Tensor x = ctx.empty(Shape{2, 8}), w = ctx.empty(Shape{8});
    EXPECT_TRUE(x.storage().symbolic());
    const Tensor s = ops::scale(ctx, x, 0.25f);
    const Tensor c = ops::softcap(ctx, s, 30.0f);
    const Tensor n = ops::rms_norm(ctx, c, w, 1e-6f);
    ops::rope(ctx, n, 7, {.base = 500.0f});
    // Step scopes hand out the recording's symbolic values too.
    memory::ForwardScope step({.slab_bytes = 1024});
    ctx.step(step, [&] { EXPECT_TRUE(ops::silu(ctx, x).storage().symbolic()); });
  }
  EXPECT_EQ(ctx.recorder(), nullptr);
  ASSERT_EQ(recorder.calls.size(), 5u);
  EXPECT_EQ(recorder.calls[0].kind, ops::OpKind::Scale);
  EXPECT_EQ(recorder.calls[0].attrs.scale, 0.25f);
  EXPECT_EQ(recorder.calls[1].kind, ops::OpKind::Softcap);
  EXPECT_EQ(recorder.calls[1].attrs.cap, 30.0f);
  EXPECT_EQ(recorder.calls[1].attrs.scale, 1.0f);  // an attribute the op does not name keeps its default
  EXPECT_EQ(recorder.calls[2].kind, ops::OpKind::RmsNorm);
  EXPECT_EQ(recorder.calls[2].inputs, 2u);
  EXPECT_EQ(recorder.calls[2].attrs.eps, 1e-6f);
  EXPECT_EQ(recorder.calls[3].kind, ops::OpKind::Rope);
  EXPECT_EQ(recorder.calls[3].inputs, 1u);  // no frequency factors
  EXPECT_EQ(recorder.calls[3].attrs.position, 7);
  EXPECT_EQ(recorder.calls[3].attrs.rope.base, 500.0f);
  EXPECT_EQ(recorder.calls[4].kind, ops::OpKind::Silu);
  for (const Recorded& r : recorder.calls) EXPECT_TRUE(ops::takes_inputs(r.kind, r.inputs));
}
