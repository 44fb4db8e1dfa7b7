// Fuzz target: the chat-template renderer (skainet::chat) on arbitrary template text, rendered with a
// fixed conversation under small limits. TemplateError (naming the construct, line and column) is its
// one answer to a template it cannot render; anything else — a crash, another exception, a hang past
// the step limit, output past the output limit — is a finding. Seeds: the real templates of
// ../shared/models/templates.
#include <algorithm>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_target.hpp"
#include "skainet/text/chat.hpp"

namespace skainet::fuzz {
namespace {

const nlohmann::ordered_json& conversation() {
  static const nlohmann::ordered_json c = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                 {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Tell a story."}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  return c;
}

}  // namespace

int chat_template_one_input(const uint8_t* data, size_t size) {
  chat::Options options;
  // Small enough that every limit is met by some input, and each input stays fast (libFuzzer's -timeout
  // is the hang detector; the time budget is well inside it).
  options.limits = {.max_output_bytes = 1u << 16,
                    .max_value_bytes = 1u << 16,
                    .max_memory_bytes = 1u << 20,
                    .max_depth = 64,
                    // 20k steps: deep enough for every construct and limit, and an input that loops to
                    // the limit costs about a millisecond, so 10 M executions fit in hours of one core.
                    .max_steps = 20'000,
                    .max_time = std::chrono::milliseconds(250)};
  options.now = [] {
    std::tm t{};
    t.tm_mday = 15;
    t.tm_year = 126;  // 2026-01-15
    return t;
  };
  try {
    const chat::Template t(as_text(data, size), options);
    const std::string out = t.render(conversation());
    if (out.size() > options.limits.max_output_bytes) fail("chat_template_fuzzer", "output past its limit");
  } catch (const chat::TemplateError&) {
    // A template it cannot render: refused with line and column.
  }
  return 0;
}

std::vector<Bytes> chat_template_seeds() {
  std::vector<Bytes> seeds;
  const std::filesystem::path dir = SKAINET_SHARED_MODELS "/templates";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jinja") files.push_back(e.path());
  std::sort(files.begin(), files.end());  // the same seeds, in the same order, everywhere
  for (const auto& f : files) seeds.push_back(read_file(f));
  return seeds;
}

}  // namespace skainet::fuzz

SKAINET_FUZZ_ENTRY(skainet::fuzz::chat_template_one_input, skainet::fuzz::chat_template_seeds)
