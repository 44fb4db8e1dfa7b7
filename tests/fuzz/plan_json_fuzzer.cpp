// Fuzz target: plan::from_json on arbitrary text. InvalidArgument is the documented answer to JSON
// that is not a plan; a plan that reads must write JSON that reads back to the same JSON, and render
// as text. Anything else escaping (a nlohmann exception, std::out_of_range, ...) is a finding, and so
// is undefined behaviour in the conversions (a number too large for its field, under UBSan).
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/model/placement.hpp"
#include "skainet/model/plan.hpp"

namespace skainet::fuzz {

int plan_json_one_input(const uint8_t* data, size_t size) {
  try {
    const plan::MemoryPlan p = plan::from_json(as_text(data, size));
    const std::string json = plan::to_json(p);
    if (plan::to_json(plan::from_json(json)) != json) fail("plan_json_fuzzer", "to_json does not read back to itself");
    (void)plan::render_text(p);
  } catch (const InvalidArgument&) {
  }
  return 0;
}

std::vector<Bytes> plan_json_seeds() {
  const auto path = std::filesystem::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";
  const gguf::Header h = gguf::read_header(path);
  placement::Platform platform;
  platform.dequantize = {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0};
  platform.matmul = {{GgmlType::F32, BlockOrder::RowMajor}};
  plan::PlanOptions small;
  small.budget = 1 << 20;
  small.available_memory = 1 << 20;
  small.n_ctx = 100000;
  std::vector<Bytes> seeds = {
      bytes_of(plan::to_json(plan::make_plan(h, placement::MemoryProfile::preset("default"), platform, {}, {}))),
      bytes_of(plan::to_json(plan::make_plan(h, placement::MemoryProfile::preset("low-memory"), platform, {}, small))),
      bytes_of(
          R"({"file":"x","file_size":1,"header_bytes_read":1,"profile":"p","tensors":[],"totals":)"
          R"({"file":0,"mapped":0,"heap":0,"pages":0,"kv":0,"slab":0},"budget":null,"fits":true,"suggestions":[]})"),
      bytes_of(R"([1, -1, 1e308, 18446744073709551616, "\ud800", {"a": null}, true, 0.5e-400])"),
  };
  return seeds;
}

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::plan_json_one_input, skainet::fuzz::plan_json_seeds)
