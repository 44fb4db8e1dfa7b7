// Fuzz target: the memory plan and its explanations from a fuzzed GGUF header. Each input is a file (a
// memfd) read with data bounds unchecked (the plan needs the header only, as `skainet plan` does);
// a header that reads is planned twice (the default profile on a machine that maps; a profile picked
// by the input's size, with a small budget, on one that cannot map and repacks Q4_0), rendered as
// text and JSON, read back from its JSON, and every tensor's decision explained. Only a
// skainet::Error may escape make_plan; a plan whose JSON does not read back (to the same JSON) is a
// finding.
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/compute/kernels.hpp"
#include "skainet/model/placement.hpp"
#include "skainet/model/plan.hpp"

namespace skainet::fuzz {
namespace {

// Fixed machines, not Platform::detect(): the same input must plan the same way everywhere.
placement::Platform machine(bool can_map) {
  placement::Platform p;
  p.can_map = can_map;
  p.max_map_bytes = can_map ? UINT64_MAX : 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto t = find_type(id);
    if (!t || !kernels::ref::has_reference(t->type)) continue;
    p.dequantize.push_back(t->type);
    p.matmul.push_back({t->type, BlockOrder::RowMajor});
  }
  if (!can_map) {
    p.repack.push_back({GgmlType::Q4_0, BlockOrder::Interleaved16});
    p.matmul.push_back({GgmlType::Q4_0, BlockOrder::Interleaved16});
  }
  return p;
}

void plan_and_explain(const gguf::Header& h, const placement::MemoryProfile& profile,
                      const placement::Platform& platform, const plan::PlanOptions& options) {
  const plan::MemoryPlan p = plan::make_plan(h, profile, platform, {}, options);
  (void)plan::render_text(p);
  (void)plan::render_text(p, true);
  // The drawing with the plan itself as its only point: re-pricing every context would multiply the
  // fuzzer's cost without reaching code the one point does not.
  std::vector<plan::ResidentPoint> here;
  if (p.kv) here.push_back({p.kv->n_ctx, p.slots, p.totals.resident(), p.totals.kv});
  (void)plan::render_svg(p, here);
  const std::string json = plan::to_json(p);
  std::string back;
  try {
    back = plan::to_json(plan::from_json(json));
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    fail("plan_fuzzer", "the JSON of a plan make_plan made does not read back");
  }
  if (back != json) fail("plan_fuzzer", "the plan's JSON does not read back to itself");
  for (size_t i = 0; i < p.tensors.size() && i < 64; ++i) {
    (void)placement::explain(p.tensors[i]);
    (void)placement::explain_long(p.tensors[i], profile, platform);
    (void)plan::to_json(p.tensors[i]);
  }
}

}  // namespace

int plan_one_input(const uint8_t* data, size_t size) {
  static MemFile file;
  static const placement::Platform mapping = machine(true), no_mapping = machine(false);
  static const placement::MemoryProfile default_profile = placement::MemoryProfile::preset("default");
  file.assign(data, size);
  gguf::ReadOptions read_options;
  read_options.check_data_bounds = false;
  try {
    const gguf::Header h = gguf::read_header(file.path, read_options);
    plan_and_explain(h, default_profile, mapping, {});
    const auto names = placement::MemoryProfile::preset_names();
    plan::PlanOptions small;
    small.budget = 1 << 20;
    small.available_memory = 1 << 22;
    plan_and_explain(h, placement::MemoryProfile::preset(names[size % names.size()]), no_mapping, small);
  } catch (const Error&) {
  }
  return 0;
}

std::vector<Bytes> plan_seeds() {
  // stories260K's header alone (metadata and tensor table; the data is what the plan never reads).
  const auto path = std::filesystem::path(SKAINET_SHARED_MODELS) / "stories260K.gguf";
  const gguf::Header h = gguf::read_header(path);
  return {read_file(path, h.data_offset)};
}

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::plan_one_input, skainet::fuzz::plan_seeds)
