// `skainet chat` with stdin from a pipe: slash commands (never sent to the model), `//` for a message
// that starts with a slash, `\` continuing a line, /save and /load, and the stats line (off unless
// --show-stats). The terminal side (line editor, Up) is chat_terminal_test.cpp.
#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

using namespace skainet::cli_test;

namespace {

const std::string kModel = kStories.string();

RunResult chat(const std::string& input, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"chat", "-m", kModel, "--temp", "0", "-n", "8", "-c", "512"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_skainet(args, input);
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The prompt size the stats line gives: "prompt N tokens".
std::string prompt_size(const RunResult& r) {
  const size_t at = r.err.find("turn 1: prompt ");
  return at == std::string::npos ? r.err : r.err.substr(at, r.err.find(" tokens", at) - at);
}

}  // namespace

TEST(ChatSlashCommands, AreNotSentToTheModelAndExitEndsWithCodeZero) {
  const RunResult plain = chat("Hello\n");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;

  const RunResult r = chat("/help\nHello\n/stats\n/exit\nTell me a story\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, plain.out);  // one reply: /help and /stats are not turns, and nothing after /exit is read
  for (const char* command : {"/help ", "/exit ", "/clear ", "/save FILE ", "/load FILE ", "/stats "})
    EXPECT_TRUE(has(r.err, std::string("\n  ") + command)) << command << "\n" << r.err;
  EXPECT_TRUE(has(r.err, "skainet: turn 1: prompt 44 tokens")) << r.err;  // what /stats printed

  const RunResult first = chat("/stats\n");
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(has(first.err, "no turn yet")) << first.err;
}

TEST(ChatSlashCommands, AnUnknownOrMalformedCommandIsAnErrorNamingIt) {
  const RunResult unknown = chat("/frobnicate\nHello\n");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.out, "");  // the chat ended there: nothing reached the model
  EXPECT_TRUE(has(unknown.err, "unknown command '/frobnicate'; /help lists the commands")) << unknown.err;

  const RunResult typo = chat("/exti\n");
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_TRUE(has(typo.err, "did you mean '/exit'?")) << typo.err;

  const RunResult surplus = chat("/exit now\n");
  EXPECT_EQ(surplus.exit_code, 1);
  EXPECT_TRUE(has(surplus.err, "/exit takes no argument (got 'now')")) << surplus.err;

  const RunResult missing = chat("/save\n");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(has(missing.err, "/save needs a FILE: /save FILE")) << missing.err;
}

class ChatConversationFiles : public ScratchTest {};

TEST_F(ChatConversationFiles, DoubleSlashSendsAMessageThatStartsWithASlash) {
  const std::string file = path("slash.json").string();
  const RunResult piped = chat("//usr is a folder\n/save " + file + "\n");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(nlohmann::ordered_json::parse(read_bytes(file)).at(0).at("content"), "/usr is a folder");
  // -p's first message is always a message: the same text, one slash dropped.
  const RunResult direct = chat("", {"-p", "/usr is a folder"});
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  EXPECT_EQ(piped.out, direct.out);
}

TEST_F(ChatConversationFiles, ALineEndingInABackslashGoesOnOntoTheNext) {
  const std::string file = path("lines.json").string();
  const RunResult continued = chat("Once upon\\\na time\n/save " + file + "\n");
  ASSERT_EQ(continued.exit_code, 0) << continued.err;
  EXPECT_EQ(nlohmann::ordered_json::parse(read_bytes(file)).at(0).at("content"), "Once upon\na time");
  EXPECT_EQ(continued.out, chat("", {"-p", "Once upon\na time"}).out);
  EXPECT_EQ(std::count(continued.out.begin(), continued.out.end(), '\n'), 1) << continued.out;  // one turn

  // The end of input in the middle of a continued entry sends what came so far, without the newline.
  const RunResult cut = chat("Once upon\\\n", {"--show-stats"});
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  EXPECT_EQ(prompt_size(cut), prompt_size(chat("", {"-p", "Once upon", "--show-stats"})));
  EXPECT_NE(prompt_size(cut), prompt_size(chat("", {"-p", "Once upon\n", "--show-stats"})));
}

TEST(ChatStats, OffByDefaultOnWithShowStats) {
  const RunResult quiet = chat("Hello\nTell me a story\n");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_FALSE(has(quiet.err, "turn 1:")) << quiet.err;
  const RunResult shown = chat("Hello\nTell me a story\n", {"--show-stats"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_TRUE(has(shown.err, "skainet: turn 1: prompt 44 tokens")) << shown.err;
  EXPECT_TRUE(has(shown.err, "skainet: turn 2: prompt")) << shown.err;
  EXPECT_EQ(quiet.out, shown.out);

  // run -cnv takes it too; plain run (which always prints its stats) refuses it.
  const RunResult cnv = run_skainet({"run", "-cnv", "-m", kModel, "--temp", "0", "-n", "8", "--show-stats"}, "Hello\n");
  EXPECT_EQ(cnv.exit_code, 0) << cnv.err;
  EXPECT_TRUE(has(cnv.err, "skainet: turn 1:")) << cnv.err;
  const RunResult plain = run_skainet({"run", "-m", kModel, "-p", "Hi", "--show-stats"});
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_TRUE(has(plain.err, "--show-stats")) << plain.err;
}

TEST_F(ChatConversationFiles, SaveThenLoadGoesOnAsTheSameConversation) {
  const std::string file = path("conversation.json").string();
  const RunResult saved = chat("Hello\n/save " + file + "\n", {"-sys", "You tell stories."});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_TRUE(has(saved.err, "saved 3 messages to " + file)) << saved.err;
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(read_bytes(file));
  const std::string reply = saved.out.substr(0, saved.out.size() - 1);
  EXPECT_EQ(messages, nlohmann::ordered_json::parse(R"([{"role": "system", "content": "You tell stories."},
      {"role": "user", "content": "Hello"}, {"role": "assistant", "content": )" +
                                                    nlohmann::json(reply).dump() + "}]"));

  // A fresh chat that loads the file answers the next message as the first chat would have.
  const RunResult whole = chat("Hello\nTell me a story\n", {"-sys", "You tell stories."});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const RunResult loaded = chat("/load " + file + "\nTell me a story\n");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
  EXPECT_TRUE(has(loaded.err, "loaded 3 messages from " + file)) << loaded.err;
  EXPECT_EQ(saved.out + loaded.out, whole.out);

  // A leading ~/ is the home folder, as a shell would read it.
  const RunResult home =
      run_skainet_env({"chat", "-m", kModel, "--temp", "0", "-n", "8", "-c", "512"}, {"HOME=" + path("").string()},
                      "/load ~/conversation.json\n/save ~/home.json\n");
  ASSERT_EQ(home.exit_code, 0) << home.err;
  EXPECT_EQ(read_bytes(path("home.json")), read_bytes(file));

  // /load replaces what was said before it, in the middle of a chat too; saving again writes the
  // same file (and replaces the old one whole).
  const std::string again = path("again.json").string();
  std::ofstream(again) << "this old text is longer than the new file and must not survive in it\n"
                       << std::string(4096, 'x');
  const RunResult replaced = chat("Where is the cat?\n/load " + file + "\n/save " + again + "\nTell me a story\n");
  ASSERT_EQ(replaced.exit_code, 0) << replaced.err;
  EXPECT_EQ(read_bytes(again), read_bytes(file));
  EXPECT_TRUE(replaced.out.ends_with(loaded.out)) << replaced.out;
}

TEST_F(ChatConversationFiles, ClearKeepsTheSystemMessageAndStartsAfresh) {
  const RunResult once = chat("Hello\n", {"-sys", "You tell stories."});
  ASSERT_EQ(once.exit_code, 0) << once.err;
  const RunResult twice = chat("Tell me a story\n/clear\nHello\n", {"-sys", "You tell stories.", "--show-stats"});
  ASSERT_EQ(twice.exit_code, 0) << twice.err;
  EXPECT_TRUE(twice.out.ends_with(once.out)) << twice.out;  // the same reply as a fresh chat's first
  EXPECT_TRUE(has(twice.err, "the conversation is cleared (the system message kept)")) << twice.err;

  const std::string file = path("cleared.json").string();
  const RunResult saved = chat("Hello\n/clear\n/save " + file + "\n", {"-sys", "S"});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_EQ(nlohmann::ordered_json::parse(read_bytes(file)),
            nlohmann::ordered_json::parse(R"([{"role": "system", "content": "S"}])"));
}

TEST_F(ChatConversationFiles, ABadFileIsAnErrorNamingItAndWhatIsWrong) {
  const auto load_error = [&](const std::string& name, const std::string& text) {
    const std::string file = path(name).string();
    std::ofstream(file) << text;
    const RunResult r = chat("/load " + file + "\nHello\n");
    EXPECT_EQ(r.exit_code, 1) << name;
    EXPECT_EQ(r.out, "") << name;
    EXPECT_TRUE(has(r.err, "skainet: error: /load " + file + ": ")) << r.err;
    return r.err;
  };
  EXPECT_TRUE(has(load_error("text.json", "not json at all"), "not JSON: "));
  EXPECT_TRUE(has(load_error("object.json", R"({"role": "user"})"), "the JSON is an object, not an array"));
  EXPECT_TRUE(has(load_error("number.json", R"([{"role": "user", "content": "hi"}, 3])"),
                  "message 2 is a number, not an object"));
  EXPECT_TRUE(
      has(load_error("role.json", R"([{"role": "wizard", "content": "hi"}])"), "message 1 has the role 'wizard'"));
  EXPECT_TRUE(
      has(load_error("content.json", R"([{"role": "user", "content": 5}])"), "message 1 has no string \"content\""));
  EXPECT_TRUE(has(load_error("cut.json", R"([{"role": "user", "content": "hi"})"), "not JSON: "));

  const std::string absent = path("absent.json").string();
  const RunResult missing = chat("/load " + absent + "\n");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(has(missing.err, "/load: " + absent + ": cannot open the conversation file")) << missing.err;
  const RunResult directory = chat("/load " + path("").string() + "\n");
  EXPECT_EQ(directory.exit_code, 1);
  EXPECT_TRUE(has(directory.err, "not a regular file")) << directory.err;

  // /save into a folder that does not exist: an error naming the file, and nothing written.
  const std::string nowhere = path("no/such/folder/c.json").string();
  const RunResult unsaved = chat("Hello\n/save " + nowhere + "\n");
  EXPECT_EQ(unsaved.exit_code, 1);
  EXPECT_TRUE(has(unsaved.err, "/save: " + nowhere + ": ")) << unsaved.err;
}
