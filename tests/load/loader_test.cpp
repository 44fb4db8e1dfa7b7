#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "skainet/compute/kernels.hpp"
#include "skainet/model/load.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace skainet;

namespace {

const fs::path kStories = fs::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";

std::vector<std::byte> file_bytes(const gguf::Header& h, const gguf::TensorInfo& t) {
  std::vector<std::byte> out(t.bytes);
  base::FileReader(h.path).read_at(t.file_offset, out.data(), out.size());
  return out;
}

bool inside(const std::byte* p, const base::FileMapping* m) { return m && p >= m->data() && p < m->data() + m->size(); }

struct Loaded {
  gguf::Header header;
  plan::MemoryPlan plan;
  load::LoadedModel model;
};

Loaded load_with(const fs::path& path, memory::ModelScope& scope, const char* profile,
                 const placement::FormOverrides& o = {},
                 const placement::Platform& platform = placement::Platform::detect()) {
  Loaded l;
  l.header = gguf::read_header(path);
  l.plan = plan::make_plan(l.header, placement::MemoryProfile::preset(profile), platform, o, {});
  l.model = load::ResolvedGguf(l.header, l.plan).load(scope, {.progress = false});
  return l;
}

// stories260K with every matmul weight whose rows divide into blocks quantized to `type`.
fs::path quantized_stories(const test::TempDir& dir, GgmlType type) {
  const fs::path out = dir / fmt::format("stories-{}.gguf", type_name(type));
  const gguf::Header h = gguf::read_header(kStories);
  gguf::Writer w(out, h.alignment);
  for (const auto& kv : h.metadata)
    if (kv.key != "general.alignment") w.set(kv.key, kv.value);
  std::vector<GgmlType> types;
  for (const auto& t : h.tensors) {
    const bool quantize = t.shape.size() == 2 && t.shape[0] % 32 == 0;
    types.push_back(quantize ? type : t.type);
    w.add_tensor(t.name, t.shape, types.back());
  }
  w.write([&](size_t i, std::span<std::byte> dst) {
    const auto& t = h.tensors[i];
    auto src = file_bytes(h, t);
    if (types[i] == t.type) {
      std::memcpy(dst.data(), src.data(), src.size());
      return;
    }
    const uint64_t n = t.shape[0];
    const uint64_t rows = t.elements() / n;
    for (uint64_t r = 0; r < rows; ++r)
      kernels::ref::quantize_row(type, reinterpret_cast<const float*>(src.data()) + r * n,
                                 dst.data() + r * row_bytes(type, n), static_cast<int64_t>(n));
  });
  return out;
}

}  // namespace

TEST(Loader, DefaultProfileMapsEveryTensorOfStories) {
  memory::ModelScope scope("stories");
  const Loaded l = load_with(kStories, scope, "default");
  ASSERT_EQ(l.model.names.size(), 48u);
  ASSERT_TRUE(l.model.mapping);
  EXPECT_EQ(l.model.stats.mapped, 48u);
  EXPECT_EQ(l.model.stats.payload_bytes_read, 0u) << "mapped tensors are not read at load";
  for (size_t i = 0; i < l.plan.tensors.size(); ++i) {
    const auto& d = l.plan.tensors[i];
    const Tensor& t = l.model.weight(d.tensor);
    EXPECT_TRUE(inside(t.bytes(), l.model.mapping.get())) << d.tensor;
    EXPECT_EQ(t.storage().domain(), MemoryDomain::MappedFile);
    EXPECT_EQ(t.shape(), Shape::from_ggml(d.shape));
    const auto expect = file_bytes(l.header, l.header.tensors[i]);
    EXPECT_EQ(std::memcmp(t.bytes(), expect.data(), expect.size()), 0) << d.tensor;
  }
  EXPECT_EQ(l.model.weight("token_embd.weight").shape(), (Shape{512, 64}));
  EXPECT_THROW(l.model.weight("blk.9.attn_q.weight"), Error);
}

TEST(Loader, InMemoryCopiesAndNothingPointsIntoAMapping) {
  memory::ModelScope scope("stories");
  const Loaded l = load_with(kStories, scope, "in-memory");
  EXPECT_FALSE(l.model.mapping);
  EXPECT_EQ(l.model.stats.copied, 48u);
  for (size_t i = 0; i < l.plan.tensors.size(); ++i) {
    const auto& d = l.plan.tensors[i];
    const Tensor& t = l.model.weight(d.tensor);
    EXPECT_EQ(t.storage().domain(), d.spec.domain) << d.tensor;
    const auto expect = file_bytes(l.header, l.header.tensors[i]);
    EXPECT_EQ(std::memcmp(t.bytes(), expect.data(), expect.size()), 0) << d.tensor;
  }
  EXPECT_EQ(scope.stats().heap_bytes + scope.stats().page_bytes, l.plan.totals.heap + l.plan.totals.pages);
}

TEST(Loader, MappedExactlyWhenThePlanSaysSo) {
  placement::FormOverrides o;
  o.per_tensor.push_back(placement::TensorOverride::parse("^output\\.weight$=keep,heap"));
  o.per_tensor.push_back(placement::TensorOverride::parse("attn_q=f32,heap"));
  // stories260K's whole file lies within one fault span of any copy, which would copy every tensor
  // (placement::copy_small_amid_copies): a platform without that rule keeps the rest mapped here.
  placement::Platform platform = placement::Platform::detect();
  platform.fault_span = 0;
  for (const placement::Platform& p : {platform, placement::Platform::detect()}) {
    memory::ModelScope scope("stories");
    const Loaded l = load_with(kStories, scope, "default", o, p);
    int mapped = 0;
    for (const auto& d : l.plan.tensors) {
      const bool in_map = inside(l.model.weight(d.tensor).bytes(), l.model.mapping.get());
      EXPECT_EQ(in_map, d.spec.domain == MemoryDomain::MappedFile) << d.tensor;
      mapped += in_map;
    }
    EXPECT_EQ(mapped, p.fault_span == 0 ? 48 - 1 - 5 : 0);
  }
}

TEST(Loader, ConvertedTensorsEqualTheReferenceDequantizeAndRequantize) {
  const test::TempDir dir("load");
  const fs::path q8 = quantized_stories(dir, GgmlType::Q8_0);
  placement::FormOverrides o;
  o.uniform = placement::WeightForm::dense_in_memory();
  o.per_tensor.push_back(placement::TensorOverride::parse("ffn_up=q4_0,heap"));
  memory::ModelScope scope("q8");
  const Loaded l = load_with(q8, scope, "default", o);
  int checked = 0;
  for (size_t i = 0; i < l.plan.tensors.size(); ++i) {
    const auto& d = l.plan.tensors[i];
    const auto& info = l.header.tensors[i];
    if (info.type != GgmlType::Q8_0) continue;
    const Tensor& t = l.model.weight(d.tensor);
    EXPECT_FALSE(inside(t.bytes(), l.model.mapping.get()));
    const auto src = file_bytes(l.header, info);
    const int64_t n = static_cast<int64_t>(info.shape[0]);
    const uint64_t rows = info.elements() / info.shape[0];
    std::vector<float> row(static_cast<size_t>(n));
    for (uint64_t r = 0; r < rows; ++r) {
      kernels::ref::dequantize_row(GgmlType::Q8_0, src.data() + r * row_bytes(GgmlType::Q8_0, n), row.data(), n);
      if (d.held_type == GgmlType::F32) {
        ASSERT_EQ(std::memcmp(t.bytes() + r * n * 4, row.data(), n * 4), 0) << d.tensor << " row " << r;
      } else {
        ASSERT_EQ(d.held_type, GgmlType::Q4_0);
        std::vector<std::byte> q(row_bytes(GgmlType::Q4_0, n));
        kernels::ref::quantize_row(GgmlType::Q4_0, row.data(), q.data(), n);
        ASSERT_EQ(std::memcmp(t.bytes() + r * q.size(), q.data(), q.size()), 0) << d.tensor << " row " << r;
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
  EXPECT_GT(l.model.stats.converted, 0u);
}

TEST(Loader, RefusesBeforeReadingWhenTheBudgetIsExceeded) {
  const gguf::Header h = gguf::read_header(kStories);
  plan::PlanOptions opts;
  opts.budget = 64 * 1024;
  const auto p =
      plan::make_plan(h, placement::MemoryProfile::preset("default"), placement::Platform::detect(), {}, opts);
  ASSERT_FALSE(p.fits);
  try {
    load::ResolvedGguf loader(h, p);
    FAIL() << "loaded a plan that does not fit";
  } catch (const load::BudgetError& e) {
    EXPECT_EQ(e.budget, 64u * 1024);
    EXPECT_EQ(e.resident, p.totals.resident());
    EXPECT_NE(e.message().find("--ctx"), std::string::npos) << e.message();
  }
}

TEST(Loader, RefusesAPlanMadeForAnotherFile) {
  const gguf::Header h = gguf::read_header(kStories);
  auto p = plan::make_plan(h, placement::MemoryProfile::preset("default"), placement::Platform::detect(), {}, {});
  p.tensors[3].file_offset += 32;
  EXPECT_THROW(load::ResolvedGguf(h, p), InvalidArgument);
  p.tensors.pop_back();
  EXPECT_THROW(load::ResolvedGguf(h, p), InvalidArgument);
}

TEST(Loader, ClosingTheModelScopeKillsEveryWeight) {
  memory::ModelScope scope("stories");
  const Loaded l = load_with(kStories, scope, "in-memory");
  const Tensor w = l.model.weight("blk.0.attn_q.weight");
  scope.close();
  EXPECT_THROW(w.bytes(), StorageClosedException);
  EXPECT_THROW(load_with(kStories, scope, "in-memory"), memory::ScopeClosedError);
}

TEST(KvCache, AllocatedInTheModelScopeAsPlanned) {
  const gguf::Header h = gguf::read_header(kStories);
  plan::PlanOptions opts;
  opts.n_ctx = 256;
  const auto p =
      plan::make_plan(h, placement::MemoryProfile::preset("default"), placement::Platform::detect(), {}, opts);
  memory::ModelScope scope("stories");
  load::KvCacheStore kv(scope, *p.kv);
  EXPECT_EQ(kv.placement().bytes, p.kv->bytes);
  EXPECT_EQ(kv.placement().domain, p.kv->domain);
  EXPECT_EQ(kv.n_ctx(), 256u);
  for (uint32_t l = 0; l < 5; ++l) {
    EXPECT_EQ(kv.k(l).shape(), (Shape{256, 32}));
    EXPECT_EQ(kv.v(l).type(), GgmlType::F16);
    EXPECT_EQ(kv.k(l).storage().domain(), p.kv->domain);
    const auto* b = reinterpret_cast<const uint16_t*>(kv.k(l).bytes());
    EXPECT_EQ(b[0], 0);
    EXPECT_EQ(b[256 * 32 - 1], 0);
  }
  EXPECT_EQ(scope.stats().heap_bytes + scope.stats().page_bytes, p.kv->bytes);
}
