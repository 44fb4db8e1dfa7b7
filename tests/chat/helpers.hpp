// Shared by the chat-template unit tests and the render_cases tool: render with a fixed clock (the
// date render_reference.py pins, 2026-01-15 10:30:00) and catch the error.
#pragma once

#include <ctime>
#include <optional>
#include <string>

#include "skainet/text/chat.hpp"

namespace skainet::chat::testing {

using json = nlohmann::ordered_json;

inline Options fixed_clock_options() {
  Options o;
  o.now = [] {
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
  // Wall time never decides a test: a loaded or sanitized run must fail on the limit a test is
  // about, not on the default 2 s budget (budget_test.cpp sets its own to test the budget).
  o.limits.max_time = std::chrono::minutes(10);
  return o;
}

inline std::string R(std::string_view tpl, const json& ctx = json::object(), Options o = fixed_clock_options()) {
  return render(tpl, ctx, o);
}

// The TemplateError a render raises, or nullopt when it renders.
inline std::optional<TemplateError> failure(std::string_view tpl, const json& ctx = json::object(),
                                            Options o = fixed_clock_options()) {
  try {
    render(tpl, ctx, o);
  } catch (const TemplateError& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace skainet::chat::testing
