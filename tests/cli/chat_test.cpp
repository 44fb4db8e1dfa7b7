// `skainet chat` and `skainet run -cnv` without a terminal: user turns on stdin, replies on stdout,
// a stats line per turn on stderr with --show-stats. stories260K has no chat template, so the built-in
// ChatML is used. Slash commands, `\` and the terminal: chat_commands_test.cpp, chat_terminal_test.cpp.
#include <algorithm>
#include <fstream>
#include <regex>

#include "cli_support.hpp"

using namespace skainet::cli_test;

namespace {

const std::string kModel = kStories.string();

std::string chatml_user(const std::string& text) {
  return "<|im_start|>user\n" + text + "<|im_end|>\n<|im_start|>assistant\n";
}

std::string greedy_reply(const std::string& prompt) {
  const RunResult r =
      run_skainet({"run", "-m", kModel, "-p", prompt, "-n", "16", "--temp", "0", "--no-display-prompt"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

struct TurnStats {
  int prompt = 0, reused = 0, processed = 0;
};

std::vector<TurnStats> turn_stats(const std::string& err) {
  static const std::regex line(R"(turn \d+: prompt (\d+) tokens \((\d+) reused from the cache, (\d+) processed)");
  std::vector<TurnStats> turns;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator(); ++it)
    turns.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3])});
  return turns;
}

}  // namespace

TEST(ChatCommand, RepliesEqualRunOnTheRenderedPromptsAndLaterTurnsProcessOnlyNewTokens) {
  const RunResult chat =
      run_skainet({"chat", "-m", kModel, "--temp", "0", "-n", "16", "--show-stats"}, "Hello\nTell me a story\n");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_NE(chat.err.find("has no tokenizer.chat_template; using the built-in chatml template"), std::string::npos)
      << chat.err;

  const std::string prompt1 = chatml_user("Hello");
  const std::string reply1 = greedy_reply(prompt1);
  const std::string prompt2 = prompt1 + reply1 + "<|im_end|>\n" + chatml_user("Tell me a story");
  const std::string reply2 = greedy_reply(prompt2);
  EXPECT_EQ(chat.out, reply1 + "\n" + reply2 + "\n");

  const std::vector<TurnStats> turns = turn_stats(chat.err);
  ASSERT_EQ(turns.size(), 2u) << chat.err;
  EXPECT_EQ(turns[0].reused, 0);
  EXPECT_EQ(turns[0].processed, turns[0].prompt);
  // Turn 2 reuses turn 1's prompt and the 15 reply tokens that were forwarded (the 16th was only
  // sampled), and processes the rest.
  EXPECT_EQ(turns[1].reused, turns[0].prompt + 15) << chat.err;
  EXPECT_EQ(turns[1].processed, turns[1].prompt - turns[1].reused);

  // run -cnv is the same conversation.
  const RunResult cnv =
      run_skainet({"run", "-cnv", "-m", kModel, "--temp", "0", "-n", "16"}, "Hello\nTell me a story\n");
  ASSERT_EQ(cnv.exit_code, 0) << cnv.err;
  EXPECT_EQ(cnv.out, chat.out);
}

TEST(ChatCommand, SystemPromptTemplateNamesAndStopStrings) {
  const RunResult chat = run_skainet({"chat", kModel, "-sys", "You tell stories.", "--temp", "0", "-n", "16"}, "Hi\n");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  const std::string system = "<|im_start|>system\nYou tell stories.<|im_end|>\n";
  EXPECT_EQ(chat.out, greedy_reply(system + chatml_user("Hi")) + "\n");

  const RunResult llama3 =
      run_skainet({"chat", kModel, "--chat-template", "llama3", "--temp", "0", "-n", "16"}, "Hi\n");
  ASSERT_EQ(llama3.exit_code, 0) << llama3.err;
  EXPECT_EQ(
      llama3.out,
      greedy_reply(
          "<s><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n") +
          "\n");
  const RunResult unknown = run_skainet({"chat", kModel, "--chat-template", "no-such-template"}, "Hi\n");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("neither a readable file nor a built-in name (chatml, llama3)"), std::string::npos)
      << unknown.err;

  // A stop string cuts the reply; what the model wrote before it is the reply.
  const std::string full = greedy_reply(chatml_user("Hello"));
  const RunResult cut = run_skainet({"chat", kModel, "--temp", "0", "-n", "16", "--stop", "Here,"}, "Hello\n");
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  const size_t at = full.find("Here,");
  EXPECT_EQ(cut.out, (at == std::string::npos ? full : full.substr(0, at)) + "\n");
}

class ChatFiles : public ScratchTest {};
TEST_F(ChatFiles, TemplateFromAFileAndAFullContext) {
  const std::string file = path("t.jinja").string();
  std::ofstream(file) << "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
                         "{% if add_generation_prompt %}[assistant] {% endif %}";
  const RunResult r =
      run_skainet({"chat", kModel, "--chat-template", file, "--temp", "0", "-n", "8"}, "Once upon a time\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, run_skainet({"run", "-m", kModel, "-p", "[user] Once upon a time\n[assistant] ", "-n", "8", "--temp",
                                "0", "--no-display-prompt"})
                           .out +
                       "\n");

  // The ChatML prompt for "Hello" is 44 tokens: the reply fills the other 20 cells.
  const RunResult full =
      run_skainet({"chat", kModel, "-c", "64", "--temp", "0", "-n", "-1", "--ignore-eos", "--show-stats"}, "Hello\n");
  EXPECT_EQ(full.exit_code, 1);
  EXPECT_NE(full.err.find("stop: context-full | context 64/64"), std::string::npos) << full.err;
  EXPECT_NE(full.err.find("the context of 64 tokens is full"), std::string::npos) << full.err;
  const RunResult too_long = run_skainet({"chat", kModel, "-c", "32"}, std::string(200, 'a') + "\n");
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_NE(too_long.err.find("the context holds 32: it is full"), std::string::npos) << too_long.err;
}

// Issue 24 finding 8: control-token text the user types ("</s>" in stories260K's vocabulary) is text
// unless --special-in-content, so it cannot end the turn or forge another.
TEST(ChatCommand, ControlTokenTextInAMessageIsTextUnlessSpecialInContent) {
  const std::string prompt = chatml_user("Hi</s>");
  auto token_count = [&](bool parse_special) {
    std::vector<std::string> args = {"tokenize", "-m", kModel, "-p", prompt, "--ids"};
    if (!parse_special) args.push_back("--no-parse-special");
    const RunResult r = run_skainet(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return static_cast<int>(std::count(r.out.begin(), r.out.end(), ',')) + 1;
  };

  const RunResult safe = run_skainet({"chat", kModel, "--temp", "0", "-n", "8", "--show-stats"}, "Hi</s>\n");
  ASSERT_EQ(safe.exit_code, 0) << safe.err;
  const std::vector<TurnStats> safe_turns = turn_stats(safe.err);
  ASSERT_EQ(safe_turns.size(), 1u) << safe.err;
  EXPECT_EQ(safe_turns[0].prompt, token_count(false));

  const RunResult trusted =
      run_skainet({"chat", kModel, "--temp", "0", "-n", "8", "--special-in-content", "--show-stats"}, "Hi</s>\n");
  ASSERT_EQ(trusted.exit_code, 0) << trusted.err;
  const std::vector<TurnStats> trusted_turns = turn_stats(trusted.err);
  ASSERT_EQ(trusted_turns.size(), 1u) << trusted.err;
  EXPECT_EQ(trusted_turns[0].prompt, token_count(true));
  EXPECT_LT(trusted_turns[0].prompt, safe_turns[0].prompt);
  const RunResult run =
      run_skainet({"run", "-m", kModel, "-p", prompt, "-n", "8", "--temp", "0", "--no-display-prompt"});
  EXPECT_EQ(trusted.out, run.out + "\n");

  // A plain `run` prompt has no messages: the flag is refused there.
  const RunResult plain = run_skainet({"run", "-m", kModel, "-p", "Hi", "--special-in-content"});
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_NE(plain.err.find("--special-in-content"), std::string::npos) << plain.err;
}
