// `skainet chat` (and `skainet run -cnv`): an interactive conversation. Each turn renders the whole
// conversation with the chat template (skainet::chat), tokenizes it, and processes only what follows
// the longest prefix already in the KV cache; the reply streams to stdout and a stats line per turn
// goes to stderr. Ctrl-C stops the current reply; Ctrl-C at the prompt, or end of input, ends the chat.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "generation_args.hpp"
#include "skainet/core/base.hpp"
#include "skainet/text/chat.hpp"
#include "skainet/model/conversation.hpp"

namespace skainet::cli {
namespace {

// The built-in templates (--chat-template NAME) and the stop string each one's turns end with, for
// vocabularies that lack the end-of-turn marker as a token (then the model writes it as text).
struct BuiltinTemplate {
  std::string_view name;
  std::string_view source;
  std::string_view end_of_turn;
};
constexpr BuiltinTemplate kBuiltins[] = {
    {"chatml",
     "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     "<|im_end|>"},
    {"llama3",
     "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
     " + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
     "<|eot_id|>"},
};
constexpr std::string_view kDefaultTemplate = "chatml";

const BuiltinTemplate* find_builtin(std::string_view name) {
  for (const auto& b : kBuiltins)
    if (b.name == name) return &b;
  return nullptr;
}

}  // namespace

ChosenTemplate choose_template(const GenerationArgs& a, const gguf::Header& header) {
  if (!a.chat_template.empty()) {
    if (const BuiltinTemplate* b = find_builtin(a.chat_template))
      return {std::string(b->source), fmt::format("built-in {}", b->name), std::string(b->end_of_turn)};
    std::error_code ec;
    if (!std::filesystem::exists(a.chat_template, ec)) {
      std::string names;
      for (const auto& b : kBuiltins) names += fmt::format("{}{}", names.empty() ? "" : ", ", b.name);
      throw InvalidArgument(fmt::format("--chat-template '{}': neither a readable file nor a built-in name ({})",
                                        a.chat_template, names));
    }
    // A regular file of at most 1 MiB; a directory, device or FIFO is refused without a blocking read.
    return {base::read_text_file(a.chat_template, "chat template", kChatTemplateMaxBytes), a.chat_template,
            std::nullopt};
  }
  if (header.find("tokenizer.chat_template") != nullptr)
    return {header.get_string("tokenizer.chat_template"), "the model's tokenizer.chat_template", std::nullopt};
  const BuiltinTemplate* b = find_builtin(kDefaultTemplate);
  fmt::print(stderr,
             "skainet: {} has no tokenizer.chat_template; using the built-in {} template (--chat-template FILE|NAME "
             "to choose another)\n",
             a.model, b->name);
  return {std::string(b->source), fmt::format("built-in {}", b->name), std::string(b->end_of_turn)};
}

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

// Without SA_RESTART, so a Ctrl-C at the prompt interrupts read() instead of waiting for a line.
void install_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  ::sigaction(SIGINT, &sa, nullptr);
}

// One line from stdin (without its newline); nullopt at end of input or on Ctrl-C.
class LineReader {
 public:
  std::optional<std::string> next() {
    for (;;) {
      if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      if (eof_) {
        if (buffer_.empty()) return std::nullopt;
        return std::exchange(buffer_, {});
      }
      char chunk[4096];
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) {
        if (g_interrupted.load()) return std::nullopt;
        continue;
      }
      if (n <= 0)
        eof_ = true;
      else
        buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  std::string buffer_;
  bool eof_ = false;
};

// Where the user's turns come from: --prompt first, then stdin a line at a time, echoed and prompted
// with "> " at a terminal.
class UserInput {
 public:
  explicit UserInput(const GenerationArgs& a)
      : interactive_(::isatty(STDIN_FILENO) != 0),
        first_(a.prompt.empty() ? std::nullopt : std::optional(a.prompt)),
        escape_(a.escape) {}

  bool interactive() const { return interactive_; }

  // The next non-empty turn; nullopt at end of input or on Ctrl-C at the prompt.
  std::optional<std::string> next() {
    if (first_) {
      if (interactive_) fmt::print("> {}\n", *first_);
      return std::exchange(first_, std::nullopt);
    }
    for (;;) {
      if (interactive_) {
        fmt::print("> ");
        std::fflush(stdout);
      }
      g_interrupted.store(false);
      std::optional<std::string> line = reader_.next();
      if (!line) {
        if (interactive_) fmt::print("\n");
        return std::nullopt;
      }
      if (escape_) *line = process_escapes(*line);
      if (!line->empty()) return line;
    }
  }

 private:
  bool interactive_;
  std::optional<std::string> first_;
  bool escape_;
  LineReader reader_;
};

generate::Options reply_options(const GenerationArgs& a, const ChosenTemplate& chosen) {
  generate::Options options;
  options.max_tokens = a.n_predict;
  options.stop_at_eos = !a.ignore_eos;
  options.stop_strings = a.stops;
  if (chosen.end_of_turn) options.stop_strings.push_back(*chosen.end_of_turn);
  return options;
}

// The conversation so far against one sequence: each turn renders all of it, and the sequence processes
// only what follows the longest prefix already in its KV cache (Sequence::generate).
class Conversation {
 public:
  Conversation(const text::Tokenizer& tok, const chat::Template& tmpl, generate::Sequence& seq,
               generate::Options options, bool special_in_content)
      : tok_(tok), tmpl_(tmpl), seq_(seq), options_(std::move(options)), special_in_content_(special_in_content) {}

  void add(const char* role, const std::string& content) {
    messages_.push_back({{"role", role}, {"content", content}});
  }

  // The prompt with the user's turn added. At a terminal, a turn whose control-token text cannot stay
  // text is refused (nullopt, the turn taken back), not the chat: the user can say it another way.
  std::optional<std::vector<int32_t>> prompt_with(const std::string& user, bool interactive) {
    add("user", user);
    try {
      // Control-token text the user typed stays text unless --special-in-content.
      return generate::tokenize_conversation(tmpl_, generate::conversation_context(messages_, tok_), tok_,
                                             {.special_in_content = special_in_content_})
          .ids;
    } catch (const generate::ContentSpecialTokenError& e) {
      if (!interactive) throw;
      fmt::print(stderr, "skainet: {}\n", e.what());
      messages_.erase(messages_.end() - 1);
      return std::nullopt;
    }
  }

  // Streams the reply to `ids` to stdout until it ends or Ctrl-C, and keeps it as the assistant's turn.
  generate::Stats reply(const std::vector<int32_t>& ids) {
    std::string reply;
    g_interrupted.store(false);
    const generate::Stats s = seq_.generate(ids, options_, [&](std::string_view piece, int32_t) {
      reply.append(piece);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return !g_interrupted.load();
    });
    fmt::print("\n");
    std::fflush(stdout);
    add("assistant", reply);
    return s;
  }

  size_t cached_tokens() const { return seq_.cached().size(); }

 private:
  const text::Tokenizer& tok_;
  const chat::Template& tmpl_;
  generate::Sequence& seq_;
  const generate::Options options_;
  const bool special_in_content_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
};

void print_turn_stats(int turn, size_t prompt_tokens, const generate::Stats& s, size_t cached, int64_t ctx_cells) {
  const bool interrupted = s.stop == generate::StopReason::Callback;
  fmt::print(stderr,
             "skainet: turn {}: prompt {} tokens ({} reused from the cache, {} processed, {:.1f} tokens/s) | "
             "reply {} tokens, {:.1f} tokens/s | stop: {} | context {}/{}\n",
             turn, prompt_tokens, s.cached_tokens, s.prompt_tokens, s.prompt_tokens_per_second(), s.generated_tokens,
             s.decode_tokens_per_second(), interrupted ? "interrupted (Ctrl-C)" : generate::stop_reason_name(s.stop),
             cached, ctx_cells);
  if (s.verify_steps > 0 || s.probes > 0)
    fmt::print(stderr,
               "skainet: turn {}: speculative: drafted {} tokens in {} verifications, accepted {} ({:.1f}%); {} "
               "probes, {} hit\n",
               turn, s.drafted_tokens, s.verify_steps, s.accepted_tokens, 100 * s.acceptance_rate(), s.probes,
               s.probe_hits);
}

}  // namespace

int run_chat(GenerationArgs& a) {
  auto engine = open_engine(a);
  const text::Tokenizer& tok = *engine->tokenizer;
  const ChosenTemplate chosen = choose_template(a, engine->header);
  const chat::Template tmpl(chosen.source);

  const uint64_t seed = a.resolve_seed();
  const int64_t ctx_cells = engine->plan.kv->n_ctx;
  generate::Generator& gen = engine->sequence->sample_with(a.sampling);
  const generate::Speculation speculation = start_speculation(a, *engine, gen);
  Conversation conversation(tok, tmpl, *engine->sequence, reply_options(a, chosen), a.special_in_content);
  if (!a.system_prompt.empty()) conversation.add("system", a.system_prompt);

  UserInput input(a);
  fmt::print(stderr,
             "skainet: chat with {} ({}; context {} tokens, seed {}). Ctrl-C stops a reply; Ctrl-C at the "
             "prompt or end of input ends the chat.\n",
             a.model, chosen.description, ctx_cells, seed);
  install_sigint();
  for (int turn = 1;;) {
    const std::optional<std::string> user = input.next();
    if (!user) return 0;
    const std::optional<std::vector<int32_t>> ids = conversation.prompt_with(*user, input.interactive());
    if (!ids) continue;
    if (static_cast<int64_t>(ids->size()) >= ctx_cells) {
      fmt::print(stderr,
                 "skainet: the conversation is {} tokens and the context holds {}: it is full; start a new chat or "
                 "raise --ctx\n",
                 ids->size(), ctx_cells);
      return 1;
    }
    const generate::Stats s = conversation.reply(*ids);
    print_turn_stats(turn++, ids->size(), s, conversation.cached_tokens(), ctx_cells);
    if (s.stop == generate::StopReason::ContextFull) {
      fmt::print(stderr,
                 "skainet: the context of {} tokens is full; the conversation ends here (raise --ctx for longer "
                 "ones)\n",
                 ctx_cells);
      return 1;
    }
  }
}

Subcommand add_chat(CLI::App& app) {
  auto a = std::make_shared<GenerationArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "Talk with a model: its chat template, the KV cache kept between turns");
  a->add_to(cmd, Command::Chat);
  return {cmd, [a] {
            a->finish_parse();
            return run_chat(*a);
          }};
}

}  // namespace skainet::cli
