// `skainet inspect`: the tensor table and hyper-parameters of stories260K, the JSON for tools, and
// errors as exit code 1 with a message.
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/cli_support.hpp"

namespace skainet::cli_test {
namespace {

using Json = nlohmann::json;

TEST(Inspect, JsonListsStoriesTensorsAndHyperParameters) {
  const RunResult r = run_skainet({"inspect", kStories.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  const gguf::Header h = gguf::read_header(kStories);

  ASSERT_EQ(j["tensors"].size(), 48u);
  EXPECT_EQ(j["metadata"]["llama.block_count"], 5);
  EXPECT_EQ(j["metadata"]["llama.embedding_length"], 64);
  EXPECT_EQ(j["metadata"]["general.architecture"], "llama");
  EXPECT_DOUBLE_EQ(j["metadata"]["llama.attention.layer_norm_rms_epsilon"].get<double>(), 1e-5);
  EXPECT_EQ(j["metadata_types"]["llama.block_count"], "uint32");
  const Json& tokens = j["metadata"]["tokenizer.ggml.tokens"];
  EXPECT_EQ(tokens["type"], "array");
  EXPECT_EQ(tokens["element_type"], "string");
  EXPECT_EQ(tokens["length"], 512);
  ASSERT_EQ(tokens["first"].size(), 5u);
  EXPECT_EQ(tokens["first"][0], "<unk>");
  EXPECT_EQ(tokens["first"][3], "<0x00>");

  const Json& hp = j["hparams"];
  EXPECT_EQ(hp["architecture"], "llama");
  EXPECT_EQ(hp["layers"], 5);
  EXPECT_EQ(hp["dim"], 64);
  EXPECT_EQ(hp["heads"], 8);
  EXPECT_EQ(hp["kv_heads"], 4);
  EXPECT_EQ(hp["ffn"], 172);
  EXPECT_EQ(hp["vocab"], 512);
  EXPECT_EQ(hp["ctx"], 2048);
  EXPECT_EQ(hp["rope_base"], 10000.0);
  EXPECT_EQ(hp["rope_base_default"], true);
  EXPECT_DOUBLE_EQ(hp["rms_eps"].get<double>(), 1e-5);

  for (size_t i = 0; i < h.tensors.size(); ++i) {
    const Json& t = j["tensors"][i];
    EXPECT_EQ(t["name"], h.tensors[i].name);
    EXPECT_EQ(t["type"], "F32");
    EXPECT_EQ(t["shape"].get<std::vector<uint64_t>>(), h.tensors[i].shape);
    EXPECT_EQ(t["bytes"], h.tensors[i].bytes);
    EXPECT_EQ(t["offset"], h.tensors[i].file_offset);
  }
  EXPECT_EQ(j["tensors"][9]["name"], "blk.0.ffn_down.weight");
  EXPECT_EQ(j["tensors"][9]["shape"], Json::array({172, 64}));
  EXPECT_EQ(j["tensors"][9]["bytes"], 172 * 64 * 4);
  EXPECT_EQ(j["tensors"][0]["offset"], 14176);
  EXPECT_EQ(j["totals"]["tensors"], 48);
  EXPECT_EQ(j["totals"]["by_type"]["F32"]["tensors"], 48);
  uint64_t bytes = 0;
  for (const auto& t : h.tensors) bytes += t.bytes;
  EXPECT_EQ(j["totals"]["bytes"], bytes);
  // Header only: the reader read the header (plus at most one read-ahead chunk), not the 1.1 MiB of
  // tensor data.
  EXPECT_LT(j["header_bytes_read"].get<uint64_t>(), j["data_offset"].get<uint64_t>() + 65536);
  EXPECT_LT(j["header_bytes_read"].get<uint64_t>(), j["file_size"].get<uint64_t>() / 8);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(Inspect, TextShowsSummaryAndEveryTensor) {
  const RunResult r = run_skainet({"inspect", kStories.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const gguf::Header h = gguf::read_header(kStories);
  for (const auto& t : h.tensors) EXPECT_NE(r.out.find(" " + t.name + " "), std::string::npos) << t.name;
  for (const char* line :
       {"  layers        5\n", "  dim           64\n", "  heads         8\n", "  kv heads      4\n",
        "  ffn           172\n", "  vocab         512\n", "  ctx           2048\n", "  rms eps       1e-05\n"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line;
  EXPECT_NE(r.out.find("tensors (48)"), std::string::npos);
}

class InspectErrors : public ScratchTest {};

TEST_F(InspectErrors, MissingFileIsExitCodeOneNamingTheFile) {
  const RunResult r = run_skainet({"inspect", path("absent.gguf").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("skainet: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("absent.gguf"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(InspectErrors, MalformedFilesAreExitCodeOneNeverACrash) {
  const std::string stories = read_bytes(kStories);
  struct Case {
    std::string name, bytes, expect;
  };
  std::string bad_magic = stories;
  bad_magic[0] = 'X';
  std::string bad_version = stories;
  bad_version[4] = 99;
  const std::vector<Case> cases = {
      {"empty.gguf", "", "empty.gguf"},
      {"magic.gguf", bad_magic, "magic"},
      {"version.gguf", bad_version, "version"},
      {"cut-in-header.gguf", stories.substr(0, 5000), "cut-in-header.gguf"},
      {"cut-in-data.gguf", stories.substr(0, 200000), "cut-in-data.gguf"},
  };
  for (const Case& c : cases) {
    {
      std::ofstream out(path(c.name), std::ios::binary);
      out << c.bytes;
    }
    const RunResult r = run_skainet({"inspect", path(c.name).string(), "--json"});
    EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.rfind("skainet: error: ", 0), 0u) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.name << ": " << r.err;
  }
}

TEST(InspectUsage, UsageMistakesAreExitCodeTwo) {
  EXPECT_EQ(run_skainet({}).exit_code, 2);
  EXPECT_EQ(run_skainet({"inspect"}).exit_code, 2);
  EXPECT_EQ(run_skainet({"frobnicate"}).exit_code, 2);
  const RunResult help = run_skainet({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("quantize"), std::string::npos);
}

}  // namespace
}  // namespace skainet::cli_test
