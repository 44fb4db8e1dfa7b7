// GET /metrics and GET /slots rendered from a snapshot (metrics.cpp): Prometheus's text format under
// llama-server's names, and /slots in llama-server's shape.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "skainet/app/serve.hpp"

namespace skainet::serve {
namespace {

struct Parsed {
  std::map<std::string, double> values;
  std::map<std::string, std::string> types;
};

// Reads the exposition as a scraper does; any line that is neither a comment nor `name value` fails.
Parsed parse_exposition(const std::string& text) {
  Parsed out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string first, name, rest;
    words >> first;
    if (first == "#") {
      std::string kind;
      words >> kind >> name >> rest;
      if (kind == "TYPE") out.types[name] = rest;
      continue;
    }
    double value = 0;
    EXPECT_TRUE(static_cast<bool>(words >> value)) << "not `name value`: " << line;
    EXPECT_FALSE(words >> rest) << "more than `name value`: " << line;
    out.values[first] = value;
  }
  return out;
}

TEST(ServeMetrics, EveryMetricHasHelpTypeAndValue) {
  const MetricsSnapshot m{.prompt_tokens = 120,
                          .prompt_seconds = 0.5,
                          .predicted_tokens = 40,
                          .predicted_seconds = 2.0,
                          .decode_steps = 45,
                          .requests_processing = 2,
                          .requests_deferred = 3,
                          .kv_cells_used = 256,
                          .kv_cells = 1024,
                          .prompt_cache_entries = 2,
                          .prompt_cache_bytes = 4096};
  const std::string text = metrics_text(m);
  const Parsed p = parse_exposition(text);
  EXPECT_EQ(p.values.at("llamacpp:prompt_tokens_total"), 120);
  EXPECT_EQ(p.values.at("llamacpp:prompt_seconds_total"), 0.5);
  EXPECT_EQ(p.values.at("llamacpp:tokens_predicted_total"), 40);
  EXPECT_EQ(p.values.at("llamacpp:tokens_predicted_seconds_total"), 2.0);
  EXPECT_EQ(p.values.at("llamacpp:n_decode_total"), 45);
  EXPECT_EQ(p.values.at("llamacpp:prompt_tokens_seconds"), 240);
  EXPECT_EQ(p.values.at("llamacpp:predicted_tokens_seconds"), 20);
  EXPECT_EQ(p.values.at("llamacpp:requests_processing"), 2);
  EXPECT_EQ(p.values.at("llamacpp:requests_deferred"), 3);
  EXPECT_EQ(p.values.at("llamacpp:kv_cache_usage_ratio"), 0.25);
  EXPECT_EQ(p.values.at("skainet:prompt_cache_entries"), 2);
  EXPECT_EQ(p.values.at("skainet:prompt_cache_bytes"), 4096);
  EXPECT_EQ(p.types.size(), p.values.size());
  for (const auto& [name, value] : p.values) {
    const std::string type = p.types.at(name);
    EXPECT_TRUE(type == "counter" || type == "gauge") << name;
    // Prometheus's convention: a counter's name ends in _total, a gauge's does not.
    EXPECT_EQ(type == "counter", name.ends_with("_total")) << name;
    EXPECT_NE(text.find("# HELP " + name + " "), std::string::npos) << name;
  }
}

TEST(ServeMetrics, NothingServedYetIsZeroNotNaN) {
  const Parsed p = parse_exposition(metrics_text({}));
  EXPECT_EQ(p.values.size(), 12u);
  for (const auto& [name, value] : p.values) EXPECT_EQ(value, 0) << name;
}

TEST(ServeMetrics, SlotsInLlamaServersShape) {
  const SlotState slots[] = {{.id = 0, .n_ctx = 256, .is_processing = true, .cached_tokens = 17},
                             {.id = 1, .n_ctx = 256}};
  const nlohmann::json j = nlohmann::json::parse(slots_json(slots));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["id"], 0);
  EXPECT_EQ(j[0]["n_ctx"], 256);
  EXPECT_EQ(j[0]["is_processing"], true);
  EXPECT_EQ(j[0]["n_cached_tokens"], 17);
  EXPECT_EQ(j[1]["id"], 1);
  EXPECT_EQ(j[1]["is_processing"], false);
  EXPECT_EQ(j[1]["speculative"], false);
}

// One home for the fact: the docs show the metrics as metrics.cpp has them.
TEST(ServeMetrics, DocsShowTheTable) {
  std::ifstream in(SKAINET_DOCS_DIR "/serving.md");
  ASSERT_TRUE(in) << SKAINET_DOCS_DIR "/serving.md";
  std::stringstream docs;
  docs << in.rdbuf();
  EXPECT_NE(docs.str().find(metrics_markdown()), std::string::npos)
      << "docs/serving.md's metrics table differs from metrics.cpp; it should read:\n"
      << metrics_markdown();
}

}  // namespace
}  // namespace skainet::serve
