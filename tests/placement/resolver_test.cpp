// Decision tables for WeightFormResolver + AllocationResolver: every reason, every precedence level,
// every profile, and platform variants built by hand (cannot map, no kernel for an encoding, repack).
#include <gtest/gtest.h>

#include "skainet/model/placement.hpp"

using namespace skainet;
using namespace skainet::placement;

namespace {

constexpr uint64_t kFileSize = uint64_t{1} << 30;
const FileFacts kFile{kFileSize, 32};

gguf::TensorInfo tensor(std::string name, std::vector<uint64_t> shape, GgmlType type) {
  gguf::TensorInfo t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.type = type;
  uint64_t rows = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) rows *= t.shape[i];
  t.bytes = row_bytes(type, t.shape[0]) * rows;
  t.offset = 4096;
  t.file_offset = 8192;
  return t;
}

// A platform whose kernels read exactly `reads` in file order and can dequantize `decodes`.
Platform platform_with(std::vector<GgmlType> reads, std::vector<GgmlType> decodes = {}) {
  Platform p;
  p.page_size = 4096;
  for (GgmlType t : reads) {
    p.matmul.push_back({t, BlockOrder::RowMajor});
    p.dequantize.push_back(t);
  }
  for (GgmlType t : decodes) p.dequantize.push_back(t);
  return p;
}

const Platform kAll =
    platform_with({GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K});

Platform with_repack() {
  Platform p = kAll;
  p.repack.push_back({GgmlType::Q4_0, BlockOrder::Interleaved16});
  p.matmul.push_back({GgmlType::Q4_0, BlockOrder::Interleaved16});
  return p;
}

const auto big_q4 = tensor("blk.0.ffn_down.weight", {4096, 1024}, GgmlType::Q4_0);  // 2.25 MiB
const auto small_q4 = tensor("blk.0.attn_k.weight", {256, 64}, GgmlType::Q4_0);     // 9 KiB
const auto norm = tensor("blk.0.attn_norm.weight", {4096}, GgmlType::F32);

Decision resolve(const gguf::TensorInfo& t, const MemoryProfile& profile, const Platform& platform,
                 const FormOverrides& o = {}) {
  return decide(t, kFile, profile, platform, o);
}

}  // namespace

TEST(Resolver, DenseF32IsMappedAsStored) {
  const Decision d = resolve(tensor("output.weight", {64, 512}, GgmlType::F32), MemoryProfile::preset("default"), kAll);
  EXPECT_EQ(d.form_reason, FormReason::DenseAsStored);
  EXPECT_EQ(d.reason, PlacementReason::MappedFileBytes);
  EXPECT_EQ(d.decided_by, DecidedBy::Resolver);
  EXPECT_EQ(d.spec.domain, MemoryDomain::MappedFile);
  EXPECT_EQ(d.spec.bytes, 64u * 512 * 4);
  EXPECT_EQ(d.spec.alignment, 32u) << "mapped bytes keep the file's alignment";
  EXPECT_EQ(d.spec.scope, memory::ScopeKind::Model);
  EXPECT_FALSE(d.spec.mutable_);
}

TEST(Resolver, PackedWithKernelStaysPackedAndMapped) {
  const Decision d = resolve(big_q4, MemoryProfile::preset("default"), kAll);
  EXPECT_EQ(d.form.encoding, EncodingRequest::KeepAsStored);
  EXPECT_EQ(d.form_reason, FormReason::KernelReadsEncoding);
  EXPECT_EQ(d.reason, PlacementReason::MappedFileBytes);
  EXPECT_EQ(d.held_type, GgmlType::Q4_0);
  EXPECT_EQ(d.spec.bytes, big_q4.bytes);
}

TEST(Resolver, NoKernelDequantizesOnceToPagesOrHeapByThreshold) {
  const Platform p = platform_with({GgmlType::F32}, {GgmlType::Q4_0});
  const Decision big = resolve(big_q4, MemoryProfile::preset("default"), p);
  EXPECT_EQ(big.form.encoding, EncodingRequest::DequantizeToF32);
  EXPECT_EQ(big.form_reason, FormReason::NoKernelDequantized);
  EXPECT_EQ(big.reason, PlacementReason::CopyDequantized);
  EXPECT_EQ(big.held_type, GgmlType::F32);
  EXPECT_EQ(big.spec.bytes, 4096u * 1024 * 4);
  EXPECT_EQ(big.spec.domain, MemoryDomain::HostPages);
  EXPECT_EQ(big.spec.alignment, 4096u);
  const Decision small = resolve(small_q4, MemoryProfile::preset("default"), p);
  EXPECT_EQ(small.spec.bytes, 256u * 64 * 4);  // 64 KiB < 256 KiB
  EXPECT_EQ(small.spec.domain, MemoryDomain::HostHeap);
  EXPECT_EQ(small.spec.alignment, 64u);
}

TEST(Resolver, StrictAndLowMemoryRefuseToBlowUp) {
  const Platform p = platform_with({GgmlType::F32}, {GgmlType::Q4_0});
  for (const char* profile : {"strict", "low-memory"}) {
    try {
      resolve(big_q4, MemoryProfile::preset(profile), p);
      FAIL() << profile << " accepted a dequantize";
    } catch (const PlacementError& e) {
      EXPECT_NE(e.message().find("Q4_0"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("7.1x"), std::string::npos) << "names the byte blow-up: " << e.message();
      EXPECT_NE(e.message().find("blk.0.ffn_down.weight"), std::string::npos);
    }
  }
}

TEST(Resolver, NoKernelAndNoDequantizerIsRefusedEverywhere) {
  const auto iq = tensor("blk.0.attn_q.weight", {256, 4}, GgmlType::IQ2_XXS);
  EXPECT_THROW(resolve(iq, MemoryProfile::preset("default"), kAll), PlacementError);
}

TEST(Resolver, ThroughputRepacksWhereARepackExists) {
  const Decision d = resolve(big_q4, MemoryProfile::preset("throughput"), with_repack());
  EXPECT_EQ(d.form.order, WeightOrder::KernelFeed);
  EXPECT_EQ(d.form_reason, FormReason::RepackedForKernel);
  EXPECT_EQ(d.reason, PlacementReason::CopyRepacked);
  EXPECT_EQ(d.held_order, BlockOrder::Interleaved16);
  EXPECT_EQ(d.spec.domain, MemoryDomain::HostPages);
  EXPECT_EQ(d.spec.bytes, big_q4.bytes) << "a repack holds the same number of bytes";
  // Without a repacking for the encoding, throughput keeps file order and the mapping.
  const Decision q8 = resolve(tensor("blk.0.attn_q.weight", {4096, 64}, GgmlType::Q8_0),
                              MemoryProfile::preset("throughput"), with_repack());
  EXPECT_EQ(q8.reason, PlacementReason::MappedFileBytes);
  // Default repacks too (the copy holds what the mapping would have); low-memory keeps the file's pages.
  EXPECT_EQ(resolve(big_q4, MemoryProfile::preset("default"), with_repack()).reason, PlacementReason::CopyRepacked);
  EXPECT_EQ(resolve(big_q4, MemoryProfile::preset("low-memory"), with_repack()).reason,
            PlacementReason::MappedFileBytes);
}

// A file laid out as: norm A | repacked weight (2.25 MiB) | norm B | 3 MiB mapped Q8_0 weight | norm C |
// an overridden norm D right after a second repacked weight. A and B lie within the 2 MiB fault span
// of the copy, C 3 MiB past it; the big mapped weight and D (an override) keep their say.
TEST(Resolver, SmallTensorsAmidCopiesAreCopied) {
  const Platform platform = with_repack();
  const MemoryProfile profile = MemoryProfile::preset("default");
  auto at = [](gguf::TensorInfo t, uint64_t offset) {
    t.file_offset = offset;
    return t;
  };
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  const auto q8 = tensor("blk.0.attn_q.weight", {4096, 768}, GgmlType::Q8_0);  // 3.19 MiB, mapped
  std::vector<Decision> ds = {
      resolve(at(norm, 0), profile, platform),
      resolve(at(big_q4, 16 * 1024), profile, platform),
      resolve(at(tensor("blk.0.ffn_norm.weight", {4096}, GgmlType::F32), 16 * 1024 + big_q4.bytes), profile, platform),
      resolve(at(q8, 32 * 1024 + big_q4.bytes), profile, platform),
      resolve(at(tensor("blk.1.attn_norm.weight", {4096}, GgmlType::F32), 32 * 1024 + big_q4.bytes + q8.bytes), profile,
              platform),
      resolve(at(big_q4, 20 * kMiB), profile, platform),
  };
  FormOverrides keep;
  keep.per_tensor.push_back(TensorOverride::parse("blk.1.ffn_norm=f32,mapped"));
  ds.push_back(resolve(at(tensor("blk.1.ffn_norm.weight", {4096}, GgmlType::F32), 20 * kMiB + big_q4.bytes), profile,
                       platform, keep));
  copy_small_amid_copies(ds, profile, platform);
  EXPECT_EQ(ds[0].reason, PlacementReason::CopyAmidCopies);
  EXPECT_EQ(ds[0].spec.domain, MemoryDomain::HostHeap) << "16 KiB: below the off-heap threshold";
  EXPECT_EQ(ds[1].reason, PlacementReason::CopyRepacked);
  EXPECT_EQ(ds[2].reason, PlacementReason::CopyAmidCopies);
  EXPECT_EQ(ds[3].reason, PlacementReason::MappedFileBytes) << "not small";
  EXPECT_EQ(ds[4].reason, PlacementReason::MappedFileBytes) << "3 MiB past the copy";
  EXPECT_EQ(ds[6].reason, PlacementReason::MappedFileBytes) << "a per-tensor override keeps its say";
  EXPECT_EQ(ds[6].decided_by, DecidedBy::PerTensorOverride);
  EXPECT_NE(explain(ds[0]).find("beside copied weights"), std::string::npos) << explain(ds[0]);
  EXPECT_EQ(placement_reason_name(ds[0].reason), "copy-amid-copies");
  // Nothing copied, nothing changes.
  std::vector<Decision> mapped = {resolve(at(norm, 0), profile, kAll), resolve(at(big_q4, 16 * 1024), profile, kAll)};
  copy_small_amid_copies(mapped, profile, kAll);
  EXPECT_EQ(mapped[0].reason, PlacementReason::MappedFileBytes);
}

TEST(Resolver, InMemoryProfileAsksHeap) {
  const Decision big = resolve(big_q4, MemoryProfile::preset("in-memory"), kAll);
  EXPECT_EQ(big.reason, PlacementReason::FormAsksHeap);
  EXPECT_EQ(big.spec.domain, MemoryDomain::HostPages);
  EXPECT_EQ(big.held_type, GgmlType::Q4_0) << "in memory, still packed";
  EXPECT_EQ(resolve(small_q4, MemoryProfile::preset("in-memory"), kAll).spec.domain, MemoryDomain::HostHeap);
}

TEST(Resolver, PlatformThatCannotMap) {
  Platform p = kAll;
  p.can_map = false;
  EXPECT_EQ(resolve(big_q4, MemoryProfile::preset("default"), p).reason, PlacementReason::PlatformCannotMap);
  p = kAll;
  p.max_map_bytes = kFileSize - 1;
  const Decision d = resolve(big_q4, MemoryProfile::preset("default"), p);
  EXPECT_EQ(d.reason, PlacementReason::FileTooLargeToMap);
  EXPECT_EQ(d.spec.domain, MemoryDomain::HostPages);
}

TEST(Resolver, NormsAreReadAsF32) {
  const Decision f32 = resolve(norm, MemoryProfile::preset("default"), kAll);
  EXPECT_EQ(f32.role, TensorRole::Vector);
  EXPECT_EQ(f32.reason, PlacementReason::MappedFileBytes);
  const Decision f16 =
      resolve(tensor("blk.0.ffn_norm.weight", {4096}, GgmlType::F16), MemoryProfile::preset("strict"), kAll);
  EXPECT_EQ(f16.form_reason, FormReason::VectorNeedsF32) << "even strict: a norm is tiny";
  EXPECT_EQ(f16.reason, PlacementReason::CopyDequantized);
  EXPECT_EQ(f16.spec.domain, MemoryDomain::HostHeap);
  EXPECT_EQ(f16.spec.bytes, 4096u * 4);
}

TEST(Resolver, EmbeddingsAreReadByRowLookup) {
  const Decision d =
      resolve(tensor("token_embd.weight", {64, 512}, GgmlType::Q8_0), MemoryProfile::preset("default"), kAll);
  EXPECT_EQ(d.role, TensorRole::Embedding);
  EXPECT_EQ(d.reason, PlacementReason::MappedFileBytes);
}

TEST(Precedence, PerTensorApiBeatsPatternsBeatsUniformBeatsResolver) {
  FormOverrides o;
  o.uniform = WeightForm::dense_in_memory();
  o.per_tensor.push_back(TensorOverride::parse("attn_k=q8_0,heap"));
  o.per_tensor.push_back(TensorOverride::parse("attn=keep,heap"));
  o.weight_form_for = [](std::string_view name) -> std::optional<WeightForm> {
    if (name == "blk.1.attn_k.weight") return WeightForm::parse("keep,mapped");
    return std::nullopt;
  };
  const MemoryProfile profile = MemoryProfile::preset("default");

  const Decision api = resolve(tensor("blk.1.attn_k.weight", {256, 64}, GgmlType::Q4_0), profile, kAll, o);
  EXPECT_EQ(api.decided_by, DecidedBy::PerTensorOverride);
  EXPECT_EQ(api.override_index, -1);
  EXPECT_EQ(api.reason, PlacementReason::MappedFileBytes);

  const Decision first = resolve(small_q4, profile, kAll, o);  // blk.0.attn_k matches both patterns
  EXPECT_EQ(first.decided_by, DecidedBy::PerTensorOverride);
  EXPECT_EQ(first.override_index, 0) << "first match wins";
  EXPECT_EQ(first.reason, PlacementReason::CopyRequantized);
  EXPECT_EQ(first.held_type, GgmlType::Q8_0);
  EXPECT_EQ(first.spec.bytes, 64u * (256 / 32) * 34);

  const Decision second = resolve(tensor("blk.0.attn_q.weight", {256, 64}, GgmlType::Q4_0), profile, kAll, o);
  EXPECT_EQ(second.override_index, 1);
  EXPECT_EQ(second.reason, PlacementReason::FormAsksHeap);
  EXPECT_EQ(second.form_reason, FormReason::UserForm);

  const Decision uniform = resolve(big_q4, profile, kAll, o);
  EXPECT_EQ(uniform.decided_by, DecidedBy::UniformForm);
  EXPECT_EQ(uniform.reason, PlacementReason::CopyDequantized);
  EXPECT_EQ(uniform.held_type, GgmlType::F32);

  const Decision resolver = resolve(big_q4, profile, kAll, {});
  EXPECT_EQ(resolver.decided_by, DecidedBy::Resolver);
}

TEST(Precedence, DenseInMemoryOneLiner) {
  FormOverrides o;
  o.uniform = WeightForm::dense_in_memory();
  const MemoryProfile profile = MemoryProfile::preset("default");
  const Decision w = resolve(big_q4, profile, kAll, o);
  EXPECT_EQ(w.held_type, GgmlType::F32);
  EXPECT_NE(w.spec.domain, MemoryDomain::MappedFile);
  const Decision n = resolve(norm, profile, kAll, o);
  EXPECT_EQ(n.held_type, GgmlType::F32);
  EXPECT_EQ(n.reason, PlacementReason::FormAsksHeap) << "norms take the residency";
  EXPECT_EQ(n.decided_by, DecidedBy::UniformForm);
}

TEST(Precedence, ImpossibleUserFormsAreErrorsNamingTheTensor) {
  FormOverrides feed;
  feed.per_tensor.push_back(TensorOverride::parse("ffn_down=keep,kernel-feed"));
  EXPECT_THROW(resolve(big_q4, MemoryProfile::preset("default"), kAll, feed), PlacementError);
  // A uniform kernel-feed order falls back to file order where no repack exists.
  FormOverrides uniform;
  uniform.uniform = WeightForm::parse("keep,kernel-feed,heap");
  EXPECT_EQ(resolve(big_q4, MemoryProfile::preset("default"), kAll, uniform).held_order, BlockOrder::RowMajor);
  EXPECT_EQ(resolve(big_q4, MemoryProfile::preset("default"), with_repack(), uniform).reason,
            PlacementReason::CopyRepacked);
  // Requantizing rows of 172 to a 256-element block format cannot work.
  FormOverrides rq;
  rq.per_tensor.push_back(TensorOverride::parse("ffn_down=q4_k"));
  try {
    resolve(tensor("blk.0.ffn_down.weight", {172, 64}, GgmlType::F32), MemoryProfile::preset("default"), kAll, rq);
    FAIL();
  } catch (const PlacementError& e) {
    EXPECT_NE(e.message().find("blk.0.ffn_down.weight"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("172"), std::string::npos) << e.message();
  }
  // Keeping an encoding no kernel reads is refused rather than silently dequantized.
  FormOverrides keep;
  keep.per_tensor.push_back(TensorOverride::parse(".*=keep"));
  EXPECT_THROW(
      resolve(big_q4, MemoryProfile::preset("default"), platform_with({GgmlType::F32}, {GgmlType::Q4_0}), keep),
      PlacementError);
}

TEST(WeightFormText, ParsesAndPrints) {
  EXPECT_EQ(WeightForm::parse("f32,heap"), WeightForm::dense_in_memory());
  const WeightForm q = WeightForm::parse("q8_0, kernel-feed, heap");
  EXPECT_EQ(q.encoding, EncodingRequest::Requantize);
  EXPECT_EQ(q.requantize_to, GgmlType::Q8_0);
  EXPECT_EQ(q.order, WeightOrder::KernelFeed);
  EXPECT_EQ(WeightForm::parse(q.to_string()), q);
  EXPECT_EQ(WeightForm::parse("keep").residency, WeightResidency::Mapped);
  EXPECT_THROW(WeightForm::parse("keep,fast"), InvalidArgument);
  EXPECT_THROW(WeightForm::parse(""), InvalidArgument);
  EXPECT_THROW(TensorOverride::parse("no-equals"), InvalidArgument);
  EXPECT_THROW(TensorOverride::parse("([=f32"), InvalidArgument);
}

// Issue 10, defect 1: std::regex recursed per character and per nesting level and overflowed the
// stack (SIGSEGV) on a long name or a deeply nested pattern. The matcher must stay bounded.
TEST(OverrideTensor, LongNamesAndDeepPatternsDoNotOverflowTheStack) {
  const auto long_name = tensor(std::string(1u << 20, 'a') + ".weight", {256, 64}, GgmlType::Q4_0);
  FormOverrides all;
  all.per_tensor.push_back(TensorOverride::parse(".*=f32,heap"));
  const Decision d = resolve(long_name, MemoryProfile::preset("default"), kAll, all);
  EXPECT_EQ(d.decided_by, DecidedBy::PerTensorOverride);
  EXPECT_EQ(d.held_type, GgmlType::F32);

  FormOverrides alt;
  alt.per_tensor.push_back(TensorOverride::parse("(a|b)*x=f32,heap"));  // backtracks in std::regex
  EXPECT_EQ(resolve(long_name, MemoryProfile::preset("default"), kAll, alt).decided_by, DecidedBy::Resolver);

  const std::string deep = std::string(100000, '(') + "a" + std::string(100000, ')') + "=f32";
  EXPECT_TRUE(TensorOverride::parse(deep).matches("blk.0.a"));  // RE2 parses and runs it without recursing
  EXPECT_THROW(TensorOverride::parse(std::string(100000, '(') + "=f32"), InvalidArgument);
  EXPECT_TRUE(TensorOverride::parse("((((attn_k))))=f32").matches("blk.0.attn_k.weight"));
}

TEST(Profiles, PresetsAndSizes) {
  for (auto name : MemoryProfile::preset_names()) EXPECT_EQ(MemoryProfile::preset(name).name, name);
  EXPECT_THROW(MemoryProfile::preset("turbo"), InvalidArgument);
  EXPECT_EQ(MemoryProfile::preset("default").off_heap_threshold, 256u * 1024);
  EXPECT_EQ(parse_bytes("2G"), uint64_t{2} << 30);
  EXPECT_EQ(parse_bytes("512MiB"), uint64_t{512} << 20);
  EXPECT_EQ(parse_bytes("1.5g"), uint64_t{3} << 29);
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_THROW(parse_bytes("lots"), InvalidArgument);
  EXPECT_THROW(parse_bytes("2X"), InvalidArgument);
}

TEST(Explain, RendersTheDecision) {
  const Decision d = resolve(big_q4, MemoryProfile::preset("default"), kAll);
  EXPECT_EQ(explain(d), "blk.0.ffn_down.weight  Q4_0 -> mapped 2.2 MiB (file bytes, kernel reads Q4_0 in file order)");
  const Decision r = resolve(big_q4, MemoryProfile::preset("throughput"), with_repack());
  EXPECT_EQ(
      explain(r),
      "blk.0.ffn_down.weight  Q4_0 -> pages 2.2 MiB (repacked to 16-row interleave for the kernel (the same bytes, file pages dropped after the copy); a copy cannot be "
      "paged from the file)");
  const std::string long_text = explain_long(r, MemoryProfile::preset("throughput"), with_repack());
  EXPECT_NE(long_text.find("copy-repacked"), std::string::npos);
}

// Issue 28: --explain's form line is the form as held, the same decision the placement line and the
// plain words describe; a repacked copy asked "mapped" is held in memory and says so.
TEST(Explain, HeldFormAgreesWithThePlacement) {
  const Decision mapped = resolve(big_q4, MemoryProfile::preset("default"), kAll);
  EXPECT_EQ(held_form(mapped), mapped.form);
  EXPECT_FALSE(is_pinned(mapped));
  EXPECT_EQ(held_how(mapped), "mapped");
  EXPECT_EQ(plain_words(mapped), "mapped from the file (evictable): the kernel reads Q4_0 in file order");

  const Decision repacked = resolve(big_q4, MemoryProfile::preset("default"), with_repack());
  ASSERT_EQ(repacked.reason, PlacementReason::CopyRepacked);
  EXPECT_EQ(repacked.form.residency, WeightResidency::Mapped) << "the resolver asked for the mapping";
  const WeightForm held = held_form(repacked);
  EXPECT_EQ(held.residency, WeightResidency::Heap);
  EXPECT_EQ(held.order, WeightOrder::KernelFeed);
  EXPECT_TRUE(is_pinned(repacked));
  EXPECT_EQ(held_how(repacked), "repacked copy");
  EXPECT_TRUE(plain_words(repacked).starts_with("copied into memory (pinned): repacked to 16-row interleave"))
      << plain_words(repacked);
  const std::string text = explain_long(repacked, MemoryProfile::preset("default"), with_repack());
  EXPECT_NE(text.find("form        keep,kernel-feed,heap (decided by resolver"), std::string::npos) << text;
  EXPECT_NE(text.find("asked       keep,kernel-feed,mapped (held in memory, not mapped: copy-repacked)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("in short    " + plain_words(repacked) + "\n"), std::string::npos) << text;

  // A uniform kernel-feed order with no repack for the type falls back to file order in the form itself.
  FormOverrides uniform;
  uniform.uniform = WeightForm::parse("keep,kernel-feed,mapped");
  const Decision q8 = resolve(tensor("blk.0.attn_q.weight", {4096, 768}, GgmlType::Q8_0),
                              MemoryProfile::preset("default"), with_repack(), uniform);
  EXPECT_EQ(held_form(q8), q8.form);
  EXPECT_EQ(explain_long(q8, MemoryProfile::preset("default"), with_repack()).find("asked "), std::string::npos);

  const Decision dense = resolve(big_q4, MemoryProfile::preset("in-memory"), kAll);
  EXPECT_EQ(held_how(dense), "copy asked for");
  EXPECT_EQ(plain_words(dense), "copied into memory (pinned): the profile asks for process memory");
}

TEST(PlatformDetect, ReadsEveryReferenceEncodingInFileOrder) {
  const Platform p = Platform::detect();
  EXPECT_GE(p.page_size, 4096u);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K})
    EXPECT_TRUE(p.matmul_reads(t, BlockOrder::RowMajor)) << type_name(t);
  EXPECT_FALSE(p.matmul_reads(GgmlType::IQ2_XXS, BlockOrder::RowMajor));
}
