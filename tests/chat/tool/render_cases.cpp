// Renders a batch of (template file, context) cases with skainet::chat for render_reference.py:
//   chat_render_cases cases.json results.json
// cases.json: {"cases": [{"id": ..., "template": path, "context": {...}}]}; results.json gets
// {"id": {"ok": true, "output": text} | {"ok": false, "error": message}}. strftime_now is pinned to
// 2026-01-15 10:30:00, the date the Python side uses.
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "../helpers.hpp"
#include "skainet/text/chat.hpp"

using namespace skainet;
using json = nlohmann::ordered_json;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: chat_render_cases cases.json results.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  json cases = json::parse(in);
  const chat::Options opt = chat::testing::fixed_clock_options();
  std::map<std::string, std::string> sources;
  json results = json::object();
  for (const auto& c : cases["cases"]) {
    std::string path = c["template"].get<std::string>();
    if (!sources.count(path)) {
      std::ifstream t(path, std::ios::binary);
      std::stringstream ss;
      ss << t.rdbuf();
      sources[path] = ss.str();
    }
    json r;
    try {
      chat::Template tmpl(sources[path], opt);
      r = {{"ok", true}, {"output", tmpl.render(c["context"])}};
    } catch (const skainet::Error& e) {
      r = {{"ok", false}, {"error", e.what()}};
    }
    results[c["id"].get<std::string>()] = r;
  }
  std::ofstream out(argv[2], std::ios::binary);
  out << results.dump(1, ' ', false, json::error_handler_t::replace);
  return 0;
}
