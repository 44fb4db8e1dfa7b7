// The plan fuzz targets (tests/fuzz/plan_fuzzer.cpp: make_plan, render_text, to_json/from_json and
// explain from fuzzed headers; plan_json_fuzzer.cpp: from_json on arbitrary text) replayed in the
// default suite under any compiler on seeded mutations (tests/fuzz/fuzz_replay.hpp).
#include <gtest/gtest.h>

#include "fuzz_replay.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/model/plan.hpp"

namespace skainet::fuzz {
int plan_one_input(const uint8_t* data, size_t size);
std::vector<Bytes> plan_seeds();
int plan_json_one_input(const uint8_t* data, size_t size);
std::vector<Bytes> plan_json_seeds();
}  // namespace skainet::fuzz

namespace skainet::fuzz {
namespace {

// The mutations only reach the plan and the JSON reader if the seeds themselves get there.
TEST(PlanFuzzReplay, SeedsPlanAndReadBack) {
  MemFile file;
  const Bytes header = plan_seeds().at(0);
  file.assign(header.data(), header.size());
  gguf::ReadOptions lax;
  lax.check_data_bounds = false;
  const plan::MemoryPlan p =
      plan::make_plan(gguf::read_header(file.path, lax), placement::MemoryProfile::preset("default"),
                      placement::Platform::detect(), {}, {});
  EXPECT_TRUE(p.model.has_value());
  const std::vector<Bytes> json = plan_json_seeds();
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NO_THROW(plan::from_json(as_text(json[i].data(), json[i].size()))) << "seed " << i;
}

TEST(PlanFuzzReplay, MutatedHeadersPlanAndExplainOrFailCleanly) {
  const double s = replay(plan_one_input, plan_seeds(), 3000, 20261206);
  RecordProperty("seconds", std::to_string(s));
}

TEST(PlanFuzzReplay, MutatedPlanJsonReadsBackOrIsRefused) {
  const double s = replay(plan_json_one_input, plan_json_seeds(), 5000, 20261207);
  RecordProperty("seconds", std::to_string(s));
}

// Found with the plan_json target under UBSan: nlohmann casts a float to an integer field unchecked,
// so a size of 1e300 was undefined behaviour (and -1 became 2^64 - 1). Numbers are now checked
// against the field's type.
TEST(PlanFuzzReplay, NumbersOutsideTheirFieldAreRefused) {
  const std::string head = R"({"file":"x","file_size":)";
  const std::string tail =
      R"(,"header_bytes_read":1,"profile":"p","tensors":[],"totals":)"
      R"({"file":0,"mapped":0,"heap":0,"pages":0,"kv":0,"slab":0},"budget":null,"fits":true,"suggestions":[]})";
  EXPECT_EQ(plan::from_json(head + "12" + tail).file_size, 12u);
  for (const char* bad : {"1e300", "-1", "1.5", "18446744073709551616", "null", "\"12\""})
    EXPECT_THROW(plan::from_json(head + bad + tail), InvalidArgument) << bad;

  // The fields of the real plan, one at a time.
  const Bytes seed = plan_json_seeds().at(0);
  const std::string json(seed.begin(), seed.end());
  const auto with = [&](const std::string& field, const std::string& value) {
    const size_t at = json.find("\"" + field + "\": ");
    EXPECT_NE(at, std::string::npos) << field;
    const size_t from = at + field.size() + 4, to = json.find_first_of(",\n", from);
    return json.substr(0, from) + value + json.substr(to);
  };
  EXPECT_NO_THROW(plan::from_json(with("layers", "5")));
  EXPECT_THROW(plan::from_json(with("layers", "4294967296")), InvalidArgument);
  EXPECT_THROW(plan::from_json(with("rope_base", "1e300")), InvalidArgument);
  EXPECT_THROW(plan::from_json(with("override_index", "1e10")), InvalidArgument);
  EXPECT_THROW(plan::from_json(with("alignment", "-32")), InvalidArgument);
  EXPECT_THROW(plan::from_json(with("off_heap_threshold", "2.5e19")), InvalidArgument);
}

}  // namespace
}  // namespace skainet::fuzz
