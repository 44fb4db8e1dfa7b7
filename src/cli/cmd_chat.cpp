// `skainet chat` (and `skainet run -cnv`): an interactive conversation. Each turn renders the whole
// conversation with the chat template (skainet::chat), tokenizes it, and processes only what follows
// the longest prefix already in the KV cache; the reply streams to stdout, the turn's stats line goes
// to stderr with --show-stats (always kept for /stats). The user's entries come from chat_input.hpp (a
// line editor at a terminal), and the slash commands from chat_commands.hpp's table. Ctrl-C stops the
// current reply; /exit, Ctrl-D (end of input) or Ctrl-C at the prompt ends the chat.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chat_commands.hpp"
#include "chat_input.hpp"
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

generate::Options reply_options(const GenerationArgs& a, const ChosenTemplate& chosen) {
  generate::Options options;
  options.max_tokens = a.n_predict;
  options.stop_at_eos = !a.ignore_eos;
  options.stop_strings = a.stops;
  if (chosen.end_of_turn) options.stop_strings.push_back(*chosen.end_of_turn);
  return options;
}

// The conversation so far against one sequence: each turn renders all of it, and the sequence processes
// only what follows the longest prefix already in its KV cache (Sequence::generate). That is also why
// /clear and /load need no reset: the next turn reuses exactly the prefix the new messages share.
class Conversation final : public ChatSession {
 public:
  Conversation(const text::Tokenizer& tok, const chat::Template& tmpl, generate::Sequence& seq,
               generate::Options options, bool special_in_content)
      : tok_(tok), tmpl_(tmpl), seq_(seq), options_(std::move(options)), special_in_content_(special_in_content) {}

  void add(const char* role, const std::string& content) {
    messages_.push_back({{"role", role}, {"content", content}});
  }

  const nlohmann::ordered_json& messages() const override { return messages_; }
  void replace(nlohmann::ordered_json messages) override { messages_ = std::move(messages); }
  std::optional<std::string> last_stats() const override { return last_stats_; }
  void set_last_stats(std::string line) { last_stats_ = std::move(line); }

  // The prompt with the user's turn added. At a terminal, a turn the template or the tokenizer refuses
  // (control-token text that cannot stay text, a template's raise_exception on a loaded conversation)
  // is taken back (nullopt), not the chat: the user can say it another way or /clear.
  std::optional<std::vector<int32_t>> prompt_with(const std::string& user, bool interactive) {
    add("user", user);
    try {
      // Control-token text the user typed stays text unless --special-in-content.
      return generate::tokenize_conversation(tmpl_, generate::conversation_context(messages_, tok_), tok_,
                                             {.special_in_content = special_in_content_})
          .ids;
    } catch (const Error& e) {
      if (!interactive) throw;
      fmt::print(stderr, "skainet: {}\n", e.what());
      messages_.erase(messages_.end() - 1);
      return std::nullopt;
    }
  }

  // Streams the reply to `ids` to stdout until it ends or Ctrl-C, and keeps it as the assistant's turn.
  generate::Stats reply(const std::vector<int32_t>& ids) {
    std::string reply;
    g_chat_interrupted.store(false);
    const generate::Stats s = seq_.generate(ids, options_, [&](std::string_view piece, int32_t) {
      reply.append(piece);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return !g_chat_interrupted.load();
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
  std::optional<std::string> last_stats_;
};

std::string turn_stats(int turn, size_t prompt_tokens, const generate::Stats& s, size_t cached, int64_t ctx_cells) {
  const bool interrupted = s.stop == generate::StopReason::Callback;
  std::string text = fmt::format(
      "skainet: turn {}: prompt {} tokens ({} reused from the cache, {} processed, {:.1f} tokens/s) | "
      "reply {} tokens, {:.1f} tokens/s | stop: {} | context {}/{}",
      turn, prompt_tokens, s.cached_tokens, s.prompt_tokens, s.prompt_tokens_per_second(), s.generated_tokens,
      s.decode_tokens_per_second(), interrupted ? "interrupted (Ctrl-C)" : generate::stop_reason_name(s.stop), cached,
      ctx_cells);
  if (s.verify_steps > 0 || s.probes > 0)
    text += fmt::format(
        "\nskainet: turn {}: speculative: drafted {} tokens in {} verifications, accepted {} ({:.1f}%); {} "
        "probes, {} hit",
        turn, s.drafted_tokens, s.verify_steps, s.accepted_tokens, 100 * s.acceptance_rate(), s.probes, s.probe_hits);
  return text;
}

// A slash command; nullopt: the chat goes on. A bad one is a message at a terminal (the user types
// again) and ends the chat with exit code 1 from a pipe or a file (a script should not run on past it).
std::optional<int> run_slash_command(const SlashCommand& command, ChatSession& session, bool terminal) {
  try {
    if (run_command(command, session) == CommandOutcome::Exit) return 0;
  } catch (const CommandError& e) {
    if (!terminal) throw;
    fmt::print(stderr, "skainet: {}\n", e.what());
  }
  return std::nullopt;
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
  constrain_output(a, *engine, *engine->sequence);
  const generate::Speculation speculation = start_speculation(a, *engine, gen);
  Conversation conversation(tok, tmpl, *engine->sequence, reply_options(a, chosen), a.special_in_content);
  if (!a.system_prompt.empty()) conversation.add("system", a.system_prompt);

  ChatInput input(::isatty(STDIN_FILENO) != 0, a.prompt.empty() ? std::nullopt : std::optional(a.prompt));
  fmt::print(stderr,
             "skainet: chat with {} ({}; context {} tokens, seed {}). /help lists the commands; Ctrl-C stops a "
             "reply; /exit, Ctrl-D or Ctrl-C at the prompt ends the chat.\n",
             a.model, chosen.description, ctx_cells, seed);
  install_chat_sigint();
  for (int turn = 1;;) {
    const std::optional<ChatEntry> entry = input.next();
    if (!entry) return 0;
    ParsedEntry parsed = entry->from_command_line ? ParsedEntry{.command = std::nullopt, .message = entry->text}
                                                  : parse_entry(entry->text);
    if (parsed.command) {
      if (const std::optional<int> code = run_slash_command(*parsed.command, conversation, input.terminal()))
        return *code;
      continue;
    }
    // -e applies to what the user types, not to a command's file name (-p's text had it in finish_parse).
    const bool escape = a.escape && !entry->from_command_line;
    const std::string user = escape ? process_escapes(parsed.message) : std::move(parsed.message);
    const std::optional<std::vector<int32_t>> ids = conversation.prompt_with(user, input.terminal());
    if (!ids) continue;
    if (static_cast<int64_t>(ids->size()) >= ctx_cells) {
      fmt::print(stderr,
                 "skainet: the conversation is {} tokens and the context holds {}: it is full; start a new chat or "
                 "raise --ctx\n",
                 ids->size(), ctx_cells);
      return 1;
    }
    const generate::Stats s = conversation.reply(*ids);
    conversation.set_last_stats(turn_stats(turn++, ids->size(), s, conversation.cached_tokens(), ctx_cells));
    if (a.show_stats) fmt::print(stderr, "{}\n", *conversation.last_stats());
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
