// GET /metrics and GET /slots: what the server is doing, in llama-server's names and shapes, so the
// dashboards, autoscalers and gateways written for llama.cpp read this server unchanged (the Kubernetes
// Gateway API Inference Extension picks a replica by llamacpp:requests_deferred and
// llamacpp:kv_cache_usage_ratio). Rendering is pure: the server takes a snapshot, this turns it to text.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "skainet/app/serve.hpp"

namespace skainet::serve {
namespace {

using json = nlohmann::ordered_json;

double ratio(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

// Every metric /metrics shows, in its order: the one table the rendering and docs/serving.md's table
// read. A counter only grows; a gauge is a value now (or an average so far).
struct Metric {
  std::string_view name;
  std::string_view type;  // Prometheus's: "counter" or "gauge"
  std::string_view help;
  double (*value)(const MetricsSnapshot&);
};

constexpr Metric kMetrics[] = {
    {"llamacpp:prompt_tokens_total", "counter",
     "Prompt tokens computed (those taken from a slot's cache are not counted).",
     [](const MetricsSnapshot& m) { return static_cast<double>(m.prompt_tokens); }},
    {"llamacpp:prompt_seconds_total", "counter", "Seconds spent on prompts, until each request's first token.",
     [](const MetricsSnapshot& m) { return m.prompt_seconds; }},
    {"llamacpp:tokens_predicted_total", "counter", "Tokens generated.",
     [](const MetricsSnapshot& m) { return static_cast<double>(m.predicted_tokens); }},
    {"llamacpp:tokens_predicted_seconds_total", "counter", "Seconds spent generating, after each first token.",
     [](const MetricsSnapshot& m) { return m.predicted_seconds; }},
    {"llamacpp:n_decode_total", "counter", "Batched forward passes (one advances every busy slot).",
     [](const MetricsSnapshot& m) { return static_cast<double>(m.decode_steps); }},
    {"llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput since the start, in tokens/s.",
     [](const MetricsSnapshot& m) { return ratio(static_cast<double>(m.prompt_tokens), m.prompt_seconds); }},
    {"llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput since the start, in tokens/s.",
     [](const MetricsSnapshot& m) { return ratio(static_cast<double>(m.predicted_tokens), m.predicted_seconds); }},
    {"llamacpp:requests_processing", "gauge", "Requests generating now (busy slots).",
     [](const MetricsSnapshot& m) { return static_cast<double>(m.requests_processing); }},
    {"llamacpp:requests_deferred", "gauge",
     "Requests admitted and not generating yet (waiting for a worker or a slot).",
     [](const MetricsSnapshot& m) { return static_cast<double>(m.requests_deferred); }},
    {"llamacpp:kv_cache_usage_ratio", "gauge",
     "KV-cache cells holding tokens over all slots' cells (an idle slot keeps its last prompt for reuse).",
     [](const MetricsSnapshot& m) {
       return ratio(static_cast<double>(m.kv_cells_used), static_cast<double>(m.kv_cells));
     }},
    {"skainet:prompt_cache_entries", "gauge", "Prefixes the prompt cache (--cache-ram) holds beyond the slots.",
     [](const MetricsSnapshot& m) { return static_cast<double>(m.prompt_cache_entries); }},
    {"skainet:prompt_cache_bytes", "gauge", "Bytes those prefixes take (at most --cache-ram).",
     [](const MetricsSnapshot& m) { return static_cast<double>(m.prompt_cache_bytes); }},
};

}  // namespace

std::string metrics_text(const MetricsSnapshot& m) {
  std::string out;
  for (const Metric& metric : kMetrics)
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", metric.name, metric.help, metric.type,
                       metric.value(m));
  return out;
}

std::string metrics_markdown() {
  std::string out = "| metric | type | meaning |\n|---|---|---|\n";
  for (const Metric& metric : kMetrics)
    out += fmt::format("| `{}` | {} | {} |\n", metric.name, metric.type, metric.help);
  return out;
}

std::string slots_json(std::span<const SlotState> slots) {
  json out = json::array();
  for (const SlotState& s : slots)
    out.push_back({{"id", s.id},
                   {"n_ctx", s.n_ctx},
                   {"speculative", s.speculative},
                   {"is_processing", s.is_processing},
                   {"n_cached_tokens", s.cached_tokens}});
  return out.dump();
}

}  // namespace skainet::serve
