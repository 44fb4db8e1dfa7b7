// skainet::chat — renders a GGUF `tokenizer.chat_template` (Jinja2) the way HuggingFace's
// apply_chat_template does: trim_blocks and lstrip_blocks on, an immutable sandbox, loop controls,
// `raise_exception`, `strftime_now` and a `tojson` filter that is Python's json.dumps.
//
//   std::string source = ...;                    // the GGUF's tokenizer.chat_template, or a .jinja file
//   chat::Template tmpl(source);                                        // parses; throws TemplateError
//   nlohmann::ordered_json ctx = {
//       {"messages", {{{"role", "system"}, {"content", "Be brief."}},
//                     {{"role", "user"}, {"content", "Hi"}}}},
//       {"add_generation_prompt", true}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
//   std::string prompt = tmpl.render(ctx);                              // byte for byte Jinja2's text
//
// Every failure — a syntax error, a construct outside the supported subset, the template's own
// raise_exception, a limit — is a TemplateError that names the construct and its line and column.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "skainet/core/base.hpp"

namespace skainet::chat {

// line/column are 1-based positions in the template source; 0 when the error has no position.
class TemplateError : public Error {
 public:
  TemplateError(std::string message, int line, int column);
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }

 private:
  int line_ = 0;
  int column_ = 0;
};

// What one render may use. Each is checked before the work or the allocation it bounds, and a render
// past one fails with a TemplateError naming the limit. A hostile template (one in a model file)
// meets these, so they bound what it can cost: about max_memory_bytes + max_output_bytes of memory and
// max_time of CPU, whatever it does.
struct Limits {
  uint64_t max_output_bytes = 16u << 20;  // the rendered text
  uint64_t max_value_bytes = 16u << 20;   // one value built on the way: a string, or a list's or dict's own items
  // Everything the render's values and text buffers hold at once (strings, lists, dicts, macro output).
  uint64_t max_memory_bytes = 64u << 20;
  int max_depth = 200;  // nested macro calls, block bodies and expressions
  // Work, in steps: one per statement, expression, loop iteration or item a filter touches, and one per
  // 256 bytes copied or scanned. The default ends the slowest loops found in about a second, and lets
  // every real template render 400 turns (1 MiB) of conversation.
  uint64_t max_steps = 10'000'000;
  // Wall-clock time of one render; the backstop for work the steps count too cheaply.
  std::chrono::milliseconds max_time{2000};
};

struct Options {
  Limits limits;
  // Source of `strftime_now`; local time when empty. Tests inject a fixed date.
  std::function<std::tm()> now;
};

namespace detail {
struct Program;
}

class Template {
 public:
  explicit Template(std::string_view source, Options options = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // `context` is a JSON object; every key becomes a template variable (messages, tools,
  // add_generation_prompt, bos_token, ...). Key order is kept, so tojson writes what it was given.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::unique_ptr<detail::Program> program_;
  Options options_;
};

// Parses and renders once.
std::string render(std::string_view source, const nlohmann::ordered_json& context, const Options& options = {});

}  // namespace skainet::chat
