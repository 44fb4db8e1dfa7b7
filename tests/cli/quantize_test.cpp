// quantize: stories260K to several targets; fallbacks as data, metadata copied, values close to the
// original, errors, atomic output.
#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "cli/cli_support.hpp"
#include "skainet/model/convert.hpp"

namespace skainet::cli_test {
namespace {

class Quantize : public ScratchTest {};

bool is_norm(const std::string& name) { return name.find("_norm.weight") != std::string::npos; }
bool is_ffn_down(const std::string& name) { return name.find("ffn_down") != std::string::npos; }

convert::Report quantize_stories(const std::filesystem::path& out, std::string_view type) {
  convert::QuantizeOptions o;
  o.scheme = convert::parse_scheme(type);
  o.threads = 2;
  return convert::quantize(kStories, out, o);
}

void expect_metadata_copied(const gguf::Header& in, const gguf::Header& out, uint32_t file_type) {
  for (const auto& kv : in.metadata) {
    const gguf::Value* v = out.find(kv.key);
    ASSERT_NE(v, nullptr) << kv.key;
    EXPECT_TRUE(*v == kv.value) << kv.key;
  }
  EXPECT_EQ(out.get_u32("general.file_type"), file_type);
  EXPECT_EQ(out.get_u32("general.quantization_version"), 2u);
  EXPECT_EQ(out.metadata.size(), in.metadata.size() + 2);
  // Keys keep their order.
  for (size_t i = 0; i < in.metadata.size(); ++i) EXPECT_EQ(out.metadata[i].key, in.metadata[i].key);
}

TEST_F(Quantize, LegacyTypesFallBackOnFfnDownKeepNormsAndStayClose) {
  struct Case {
    std::string type;
    GgmlType want;
    uint32_t file_type;
    double bound;  // relative L2 error of a quantized weight
  };
  const std::vector<Case> cases = {{"Q8_0", GgmlType::Q8_0, 7, 0.01},
                                   {"Q4_0", GgmlType::Q4_0, 2, 0.15},
                                   {"Q5_1", GgmlType::Q5_1, 9, 0.06},
                                   {"F16", GgmlType::F16, 1, 0.001}};
  const gguf::Header in = gguf::read_header(kStories);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    const auto file = path(c.type + ".gguf");
    const convert::Report report = quantize_stories(file, c.type);
    const gguf::Header out = gguf::read_header(file);
    ASSERT_EQ(out.tensors.size(), 48u);
    ASSERT_EQ(report.tensors.size(), 48u);
    EXPECT_EQ(report.bytes_written, out.file_size);
    expect_metadata_copied(in, out, c.file_type);

    size_t fell_back = 0;
    for (size_t i = 0; i < 48; ++i) {
      const auto& t = out.tensors[i];
      const auto& choice = report.tensors[i];
      SCOPED_TRACE(t.name);
      EXPECT_EQ(t.name, in.tensors[i].name);
      EXPECT_EQ(t.shape, in.tensors[i].shape);
      EXPECT_EQ(t.type, choice.type);
      const auto original = read_tensor(in, t.name), decoded = read_tensor(out, t.name);
      if (is_norm(t.name)) {
        EXPECT_EQ(t.type, GgmlType::F32);
        EXPECT_EQ(choice.rule, convert::TypeRule::KeptF32);
        EXPECT_EQ(decoded, original);
      } else if (is_ffn_down(t.name) && c.want != GgmlType::F16) {
        // Rows of 172 elements: no 32-element block fits, so F16.
        EXPECT_EQ(t.type, GgmlType::F16);
        ASSERT_TRUE(choice.fallback);
        EXPECT_EQ(choice.fallback->wanted, c.want);
        EXPECT_EQ(choice.fallback->chosen, GgmlType::F16);
        EXPECT_EQ(choice.fallback->reason, convert::FallbackReason::RowNotMultipleOfBlock);
        EXPECT_EQ(choice.fallback->row_elements, 172u);
        EXPECT_EQ(choice.fallback->wanted_block, 32u);
        EXPECT_LT(relative_error(decoded, original), 0.001);
        ++fell_back;
      } else {
        EXPECT_EQ(t.type, c.want);
        EXPECT_FALSE(choice.fallback);
        const double err = relative_error(decoded, original);
        EXPECT_LT(err, c.bound);
        EXPECT_GT(err, 0.0);
      }
    }
    EXPECT_EQ(fell_back, c.want == GgmlType::F16 ? 0u : 5u);
    EXPECT_EQ(report.fallback_count(), fell_back);
  }
}

TEST_F(Quantize, KQuantMixFallsBackToLegacyBlocksOnSmallRows) {
  const convert::Report report = quantize_stories(path("km.gguf"), "Q4_K_M");
  const gguf::Header in = gguf::read_header(kStories), out = gguf::read_header(path("km.gguf"));
  EXPECT_EQ(out.get_u32("general.file_type"), 15u);
  for (const auto& c : report.tensors) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(out.find_tensor(c.name)->type, c.type);
    if (is_norm(c.name)) {
      EXPECT_EQ(c.type, GgmlType::F32);
    } else if (c.name == "output.weight") {
      EXPECT_EQ(c.type, GgmlType::Q8_0);  // rows of 64 do not fit Q6_K: llama.cpp's output rule says Q8_0
      EXPECT_FALSE(c.fallback);
    } else if (is_ffn_down(c.name)) {
      EXPECT_EQ(c.type, GgmlType::F16);  // 172 fits neither 256 nor 32
      ASSERT_TRUE(c.fallback);
    } else if (c.name == "blk.2.attn_v.weight" || c.name == "blk.4.attn_v.weight") {
      ASSERT_TRUE(c.fallback);  // use_more_bits(2 or 4, 5): Q6_K, which falls back to Q8_0
      EXPECT_EQ(c.fallback->wanted, GgmlType::Q6_K);
      EXPECT_EQ(c.type, GgmlType::Q8_0);
    } else {
      ASSERT_TRUE(c.fallback);
      EXPECT_EQ(c.fallback->wanted, GgmlType::Q4_K);
      EXPECT_EQ(c.type, GgmlType::Q5_0);
    }
    if (!is_norm(c.name)) {
      EXPECT_LT(relative_error(read_tensor(out, c.name), read_tensor(in, c.name)), 0.06);
    }
  }
}

TEST_F(Quantize, RequantizesAQuantizedInput) {
  quantize_stories(path("q8.gguf"), "Q8_0");
  convert::QuantizeOptions o;
  o.scheme = convert::parse_scheme("Q4_0");
  const convert::Report report = convert::quantize(path("q8.gguf"), path("q4.gguf"), o);
  const gguf::Header in = gguf::read_header(kStories), out = gguf::read_header(path("q4.gguf"));
  EXPECT_EQ(out.get_u32("general.file_type"), 2u);
  for (const auto& c : report.tensors) {
    SCOPED_TRACE(c.name);
    if (is_ffn_down(c.name)) {
      EXPECT_EQ(c.source, GgmlType::F16);
      EXPECT_EQ(c.type, GgmlType::F16);
    } else if (!is_norm(c.name)) {
      EXPECT_EQ(c.source, GgmlType::Q8_0);
      EXPECT_EQ(c.type, GgmlType::Q4_0);
      EXPECT_LT(relative_error(read_tensor(out, c.name), read_tensor(in, c.name)), 0.15);
    }
  }
}

TEST_F(Quantize, AcceptsHalfPrecisionInputs) {
  // synth draws the same values whatever the type, so a BF16 or F16 model decoded back to F32 must
  // match the F32 model of the same seed up to the half format's rounding.
  convert::SynthOptions s;
  s.shape = *convert::find_preset("tiny");
  s.seed = 3;
  s.scheme = convert::parse_scheme("F32");
  convert::synth(path("f32.gguf"), s);
  const gguf::Header ref = gguf::read_header(path("f32.gguf"));
  for (const auto& [type, bound] : {std::pair{"BF16", 0.005}, std::pair{"F16", 0.001}}) {
    SCOPED_TRACE(type);
    s.scheme = convert::parse_scheme(type);
    convert::synth(path("half.gguf"), s);
    convert::QuantizeOptions o;
    o.scheme = convert::parse_scheme("F32");
    const convert::Report report = convert::quantize(path("half.gguf"), path("back.gguf"), o);
    const gguf::Header back = gguf::read_header(path("back.gguf"));
    for (const auto& t : back.tensors) {
      EXPECT_EQ(t.type, GgmlType::F32) << t.name;
      const double err = relative_error(read_tensor(back, t.name), read_tensor(ref, t.name));
      if (is_norm(t.name)) {
        EXPECT_EQ(err, 0.0) << t.name;  // norms were F32 all along
      } else {
        EXPECT_LT(err, bound) << t.name;
        EXPECT_GT(err, 0.0) << t.name;
      }
    }
    EXPECT_EQ(report.fallback_count(), 0u);
  }
}

TEST_F(Quantize, CommandLineReportsFallbacks) {
  const RunResult r = run_skainet({"quantize", kStories.string(), path("q4.gguf").string(), "q4_0", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const convert::Report lib = quantize_stories(path("lib.gguf"), "Q4_0");
  EXPECT_TRUE(read_bytes(path("q4.gguf")) == read_bytes(path("lib.gguf")));
  for (int l = 0; l < 5; ++l) {
    const std::string line = fmt::format("blk.{}.ffn_down.weight", l);
    EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("fallbacks (5)"), std::string::npos) << r.out;
}

TEST_F(Quantize, ErrorsAreExitCodeOneAndLeaveNoFile) {
  // Unknown type.
  RunResult r = run_skainet({"quantize", kStories.string(), path("o.gguf").string(), "Q9_9"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown type 'Q9_9'"), std::string::npos) << r.err;
  // Missing input.
  r = run_skainet({"quantize", path("absent.gguf").string(), path("o.gguf").string(), "Q8_0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("absent.gguf"), std::string::npos) << r.err;
  // Malformed input: cut inside the data section.
  {
    std::ofstream cut(path("cut.gguf"), std::ios::binary);
    cut << read_bytes(kStories).substr(0, 300000);
  }
  r = run_skainet({"quantize", path("cut.gguf").string(), path("o.gguf").string(), "Q8_0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cut.gguf"), std::string::npos) << r.err;
  // An impossible output path.
  r = run_skainet({"quantize", kStories.string(), path("no/such/dir/o.gguf").string(), "Q8_0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("o.gguf"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(path("o.gguf")));
  // Failing at the very end (the target is a directory, so the rename fails): no file, no temp left.
  std::filesystem::create_directory(path("dir.gguf"));
  r = run_skainet({"quantize", kStories.string(), path("dir.gguf").string(), "Q8_0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("skainet: error: ", 0), 0u) << r.err;
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"cut.gguf", "dir.gguf"}));
  EXPECT_TRUE(std::filesystem::is_empty(path("dir.gguf")));
}

// --quiet: nothing on stderr; a short job piped prints no progress either (a line every 5 s, none here).
TEST_F(Quantize, QuietAndShortPipedJobsPrintNoProgress) {
  for (const bool quiet : {true, false}) {
    std::vector<std::string> args{"quantize", kStories.string(), path("q.gguf").string(), "Q8_0"};
    if (quiet) args.push_back("--quiet");
    const RunResult r = run_skainet(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "") << "quiet=" << quiet;
  }
}

}  // namespace
}  // namespace skainet::cli_test
