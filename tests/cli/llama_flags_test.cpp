// What a llama.cpp (or Ollama) user types that skainet does not spell the same way (issue 28): an
// unknown option or command named with the nearest real one, never taken for a positional; every
// entry of kLlamaFlags either accepted with its note or refused by name; the last of a repeated
// option wins; `run MODEL PROMPT`.
#include "cli_support.hpp"
#include "cli/llama_compat.hpp"

using namespace skainet::cli_test;
namespace cli = skainet::cli;

namespace {

const std::string kModel = kStories.string();

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(LlamaFlags, AnUnknownOptionIsNamedWithTheNearestRealOneAndItsValueIsNotAPositional) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"run", "-m", kModel, "-p", "hi", "--tmep", "0.5"}, "unknown option '--tmep' for 'run'; did you mean '--temp'?"},
      {{"run", kModel, "--tmep", "0.5", "hi"}, "unknown option '--tmep' for 'run'; did you mean '--temp'?"},
      {{"run", "-m", kModel, "-p", "hi", "--top_k", "5"}, "did you mean '--top-k'?"},
      {{"run", "-m", kModel, "-p", "hi", "-ngx", "1"}, "unknown option '-ngx' for 'run'; did you mean '-ngl'?"},
      {{"run", "-m", kModel, "-p", "hi", "-ctx", "64"}, "did you mean '--ctx'?"},
      {{"serve", "-m", kModel, "--prot", "8080"}, "did you mean '--port'?"},
      {{"inspect", kModel, "--explain", "x"}, "unknown option '--explain' for 'inspect' (skainet plan has it)"},
      {{"plan", kModel, "--frobnicate"}, "unknown option '--frobnicate' for 'plan'"},
      // Named as typed, though rewritten to --flash-attn for the commands that take it.
      {{"inspect", kModel, "-fa"}, "unknown option '-fa' for 'inspect' (skainet plan has it)"},
      {{"run", "-m", kModel, "-p", "hi", "--temp=0.5", "--top_p=0.5"},
       "unknown option '--top_p' for 'run'; did you "
       "mean '--top-p'?"},
  };
  for (const Case& c : cases) {
    const RunResult r = run_skainet(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.message;
    EXPECT_TRUE(has(r.err, c.message)) << r.err;
    EXPECT_FALSE(has(r.err, "excludes")) << r.err;
  }
}

TEST(LlamaFlags, UnknownCommandsAndOtherToolsWordsAreAnswered) {
  for (const std::string word : {"runn", "rn"}) {
    const RunResult r = run_skainet({word, "-m", kModel});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "unknown command '" + word + "'; did you mean 'run'?")) << r.err;
  }
  const RunResult help = run_skainet({"help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(has(help.out, "Usage: skainet [OPTIONS] SUBCOMMAND")) << help.out;
  const RunResult help_run = run_skainet({"help", "run"});
  EXPECT_EQ(help_run.exit_code, 0);
  EXPECT_TRUE(has(help_run.out, "Usage: skainet run")) << help_run.out;
  for (const std::string word : {"list", "pull"}) {
    const RunResult r = run_skainet({word, "llama3"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "skainet has no model registry: a model is a GGUF file, given by its path")) << r.err;
  }
  EXPECT_TRUE(has(run_skainet({"show", kModel}).err, "skainet inspect FILE.gguf"));
}

// Every Refuse entry, by every spelling, in run and serve: exit code 2 before the model is read.
TEST(LlamaFlags, FlagsThatWouldChangeTheAnswerAreRefusedByName) {
  size_t refused = 0;
  for (const cli::LlamaFlag& flag : cli::kLlamaFlags) {
    if (flag.answer != cli::LlamaAnswer::Refuse) continue;
    for (std::string_view spelling : cli::llama_flag_names(flag))
      for (const std::string command : {"run", "serve"}) {
        const std::string name(spelling);
        std::vector<std::string> args{command, "-m", kModel, name, "1"};
        if (command == "run") args.insert(args.end(), {"-p", "hi"});
        const RunResult r = run_skainet(args);
        EXPECT_EQ(r.exit_code, 2) << command << " " << name;
        EXPECT_TRUE(has(
            r.err, "llama.cpp's '" + name +
                       "' is not implemented here, so it is refused rather than ignored: " + std::string(flag.meaning)))
            << r.err;
        ++refused;
      }
  }
  EXPECT_GE(refused, 2u * 20);
  // The ones the issue measured, their values as typed.
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--mirostat", "2"},
                                                {"--typical", "0.5"},
                                                {"--logit-bias", "15043+1"},
                                                {"--in-prefix", " "},
                                                {"--rope-freq-base", "1e4"}}) {
    const RunResult r = run_skainet(greedy(extra));
    EXPECT_EQ(r.exit_code, 2) << extra[0];
    EXPECT_TRUE(has(r.err, "'" + extra[0] + "' is not implemented here")) << r.err;
  }
  EXPECT_TRUE(has(run_skainet({"serve", "-m", kModel, "--timeout", "30"}).err, "'--timeout' is not implemented"));
}

// Every Note entry, by every spelling the command offers: the same text, and its note on stderr.
TEST(LlamaFlags, FlagsThatChangeNothingAreAcceptedWithWhatTheyMeanHere) {
  const RunResult plain = run_skainet(greedy({}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const cli::LlamaFlag& flag : cli::kLlamaFlags) {
    if (flag.answer != cli::LlamaAnswer::Note) continue;
    const std::string first(cli::llama_flag_names(flag).front());
    for (std::string_view spelling : cli::llama_flag_names(flag)) {
      std::vector<std::string> extra{std::string(spelling)};
      std::string shown = first;
      if (flag.value != cli::LlamaValue::None) {
        extra.push_back(flag.value == cli::LlamaValue::One ? "64" : "on");
        shown += " " + extra.back();
      }
      const RunResult r = run_skainet(greedy(extra));
      ASSERT_EQ(r.exit_code, 0) << spelling << ": " << r.err;
      EXPECT_EQ(r.out, plain.out) << spelling;
      EXPECT_TRUE(has(r.err, "skainet: " + shown + ": " + std::string(flag.meaning))) << r.err;
    }
  }
  // A switch without its value, and llama-bench's 0/1; a value it cannot take is refused.
  EXPECT_TRUE(has(run_skainet(greedy({"-fa"})).err, "skainet: -fa: attention is one fused CPU kernel"));
  EXPECT_TRUE(has(run_skainet({"plan", kModel, "-fa", "1"}).err, "skainet: -fa 1: "));
  EXPECT_TRUE(has(run_skainet({"plan", "-m", kModel, "-fa", "0,1"}).err, "skainet: -fa 0,1: "));
  EXPECT_EQ(run_skainet(greedy({"--flash-attn=sometimes"})).exit_code, 2);
  // --mlock is answered with what is true, not "ignored".
  const RunResult mlock = run_skainet(greedy({"--mlock"}));
  EXPECT_TRUE(has(mlock.err, "--mlock: no page is locked (mlock(2)): the weights the plan copies")) << mlock.err;
  EXPECT_FALSE(has(mlock.err, "ignored")) << mlock.err;
  // A command with an option of its own by that name keeps it: quantize -v lists every tensor.
  EXPECT_FALSE(has(run_skainet({"quantize", "--help"}).out, "changes nothing"));
}

TEST(LlamaFlags, TheLastOfARepeatedOptionWinsAndRepeatableOnesCollect) {
  const RunResult r = run_skainet(greedy({"-n", "16", "--n-predict", "5"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "generated 5 tokens")) << r.err;
  EXPECT_EQ(run_skainet(greedy({"--temp", "0.9", "--temp", "0"})).out, run_skainet(greedy({})).out);
  // Both stop strings count: the first never occurs, the second ends the text.
  const RunResult plain = run_skainet(greedy({}));
  const size_t at = plain.out.find("Lily");
  ASSERT_NE(at, std::string::npos) << plain.out;
  const RunResult stops = run_skainet(greedy({"--stop", "no such text", "-r", "Lily"}));
  EXPECT_EQ(stops.out, plain.out.substr(0, at));
}

TEST(LlamaFlags, RunTakesTheModelAndThePromptAsPositionalsAsOllamaDoes) {
  const std::vector<std::string> rest{"-n", "48", "--temp", "0", "-c", "256", "--no-display-prompt"};
  auto with_rest = [&](std::vector<std::string> args) {
    args.insert(args.end(), rest.begin(), rest.end());
    return run_skainet(args);
  };
  const std::string expected = run_skainet(greedy({})).out;
  const RunResult both = with_rest({"run", kModel, "Once upon a time"});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(both.out, expected);
  EXPECT_EQ(with_rest({"run", "-m", kModel, "Once upon a time"}).out, expected);
  const RunResult twice = with_rest({"run", kModel, "Once upon a time", "-p", "Once"});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_TRUE(has(twice.err, "'Once upon a time': the prompt is given twice, by -p/-f and as a positional"))
      << twice.err;
  const RunResult two = with_rest({"run", "-m", kModel, "a", "b"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_TRUE(has(two.err, "one positional, the prompt, at most")) << two.err;
  // chat: the positional is the first message.
  const RunResult chat = run_skainet({"chat", kModel, "Hello", "-n", "8", "--temp", "0"});
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_EQ(chat.out, run_skainet({"chat", "-m", kModel, "-p", "Hello", "-n", "8", "--temp", "0"}).out);
  const RunResult none = with_rest({"run", kModel});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(has(none.err, "-p,--prompt (or -f FILE)")) << none.err;
}
