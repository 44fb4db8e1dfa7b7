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

#include "skainet/chat.hpp"

using namespace skainet;
using json = nlohmann::ordered_json;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: chat_render_cases cases.json results.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  json cases = json::parse(in);
  chat::Options opt;
  opt.now = [] {
    std::tm tm{};
    tm.tm_year = 2026 - 1900;
    tm.tm_mon = 0;
    tm.tm_mday = 15;
    tm.tm_hour = 10;
    tm.tm_min = 30;
    std::time_t t = timegm(&tm);
    gmtime_r(&t, &tm);
    return tm;
  };
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
