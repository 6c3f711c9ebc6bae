// sinkstream chat through a pipe (one turn per line, answers only on stdout)
// and through a pseudo-terminal (script(1): prompt, line editing, status).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "cli_run.h"
#include "test_paths.h"

namespace ss {
namespace {

using test::run;

const std::string kModel = test::shared("models/tinystories-656k");

// Runs `chat` with the given lines on stdin (through a file, so the test
// controls exactly what arrives).
test::Run chat(const std::string& lines, const std::string& flags, bool merge_stderr = false) {
  const std::string in = test::temp_path("chat_in.txt");
  {
    std::ofstream f(in, std::ios::binary);
    f << lines;
  }
  auto r = run("chat -m " + kModel + " --temp 0 -n 24 " + flags + " < " + in, merge_stderr);
  std::filesystem::remove(in);
  return r;
}

TEST(Chat, PipedTurnsGiveOnlyAnswersOnStdout) {
  auto r = chat("Once upon a time\n\nTom had a red ball.\n/stats\n/help\nThe sun was hot.\n", "");
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.out.find("system_info"), std::string::npos);
  EXPECT_EQ(r.out.find("[sinks"), std::string::npos);
  EXPECT_EQ(r.out.find("tokens in"), std::string::npos);  // /stats goes to stderr
  // Blank lines and commands add nothing to stdout: the same turns alone give the same bytes.
  auto plain = chat("Once upon a time\nTom had a red ball.\nThe sun was hot.\n", "");
  EXPECT_EQ(r.out, plain.out);
  EXPECT_GT(r.out.size(), 30u);
}

TEST(Chat, GrammarShapesEachAnswer) {
  auto r =
      chat("Who is Lily?\nAnd Tom?\nWhat now?\n", "--grammar 'root ::= (\"Yes\" | \"No\") \", \" [a-z]{1,12} \".\"'");
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::regex shape("(Yes|No), [a-z]{1,12}\\.");
  std::istringstream lines(r.out);
  std::string line;
  int answers = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ++answers;
    EXPECT_TRUE(std::regex_match(line, shape)) << "'" << line << "' in\n" << r.out;
  }
  EXPECT_EQ(answers, 3) << r.out;
  auto bad = chat("hi\n", "--grammar 'root ::= x'", true);
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.out.find("rule 'x' is used but not defined"), std::string::npos) << bad.out;
}

// The oracle for /save and /load: a conversation continued in a new process
// from the saved file answers exactly as the one that never stopped.
TEST(Chat, SavedConversationContinuesIdenticallyInANewProcess) {
  const std::string sess = test::temp_path("chat.sess");
  const std::string turns[] = {"Once upon a time", "Tom had a red ball.", "The sun was hot.", "Sue said hello."};
  auto whole = chat(turns[0] + "\n" + turns[1] + "\n" + turns[2] + "\n" + turns[3] + "\n", "");
  ASSERT_EQ(whole.rc, 0);
  auto first = chat(turns[0] + "\n" + turns[1] + "\n/save " + sess + "\n", "");
  ASSERT_EQ(first.rc, 0);
  ASSERT_TRUE(std::filesystem::exists(sess));
  auto second = chat("/load " + sess + "\n" + turns[2] + "\n" + turns[3] + "\n", "");
  ASSERT_EQ(second.rc, 0);
  EXPECT_EQ(first.out + second.out, whole.out);
  EXPECT_GT(second.out.size(), 20u);
  // /reset: the same first line gets the first answer again.
  auto one = chat(turns[0] + "\n", "");
  auto reset = chat(turns[0] + "\n/reset\n" + turns[0] + "\n", "");
  EXPECT_EQ(reset.out, one.out + one.out);
  // A file that is not a session is refused; the conversation goes on.
  auto bad = chat("/load " + kModel + "/config.json\n" + turns[0] + "\n/load\n/nonsense\n", "", true);
  EXPECT_EQ(bad.rc, 0);
  EXPECT_NE(bad.out.find("error: "), std::string::npos);
  EXPECT_NE(bad.out.find("needs a file name"), std::string::npos);
  EXPECT_NE(bad.out.find("unknown command /nonsense"), std::string::npos);
  std::filesystem::remove(sess);
}

// Endless: with a 48-token cache (llama.cpp's -c and --keep) the
// conversation runs far past it in constant memory, sinks kept.
TEST(Chat, RunsPastTheCacheWithLlamaCppFlags) {
  std::string lines;
  for (int i = 0; i < 8; ++i) lines += "Tom and Sue played in the park.\n";
  auto r = chat(lines + "/stats\n", "-c 48 --keep 4", true);
  ASSERT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("policy sinks:4:44"), std::string::npos) << r.out;
  const auto p = r.out.find(", seen ");
  ASSERT_NE(p, std::string::npos) << r.out;
  EXPECT_GT(std::stoll(r.out.substr(p + 7)), 96) << r.out;  // twice the cache: 8 prompts of 8+ tokens, answers
  EXPECT_NE(r.out.find("cached 48, evicted "), std::string::npos) << r.out;
  auto both = run("chat -m " + kModel + " --keep 2 --sinks 2 < /dev/null", true);
  EXPECT_EQ(both.rc, 1);
  EXPECT_NE(both.out.find("--keep and --sinks"), std::string::npos) << both.out;
}

// Through a pseudo-terminal: the prompt, the echoed line (libedit), the
// streamed answer and the status line with the cache state.
TEST(Chat, TerminalShowsPromptAnswerAndStatusLine) {
  // script(1) (util-linux, in every Debian) needs a pseudo-terminal to give.
  if (std::system("script -qec true /dev/null >/dev/null 2>&1 </dev/null") != 0)
    GTEST_SKIP() << "script(1) cannot open a pseudo-terminal here";
  const std::string in = test::temp_path("pty_in.sh");
  {
    std::ofstream f(in);
    // Input arrives after the program started, as a person would type it.
    f << "sleep 1; printf 'Once upon a time\\n'; sleep 2; printf '/quit\\n'";
  }
  const std::string cmd = "sh " + in + " | timeout 60 script -qec \"" + std::string(SS_CLI_BINARY) + " chat -m " +
                          kModel + " --temp 0 -n 12\" /dev/null";
  auto r = run(cmd, true, true);
  std::filesystem::remove(in);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("> Once upon a time"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[sinks 4 | window "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a little girl"), std::string::npos) << r.out;
}

// Long commands show a bar with ETA on a terminal: bench's fast-forward to
// a far position, and quantize.
TEST(Chat, LongCommandsShowProgressWithEtaOnATerminal) {
  if (std::system("script -qec true /dev/null >/dev/null 2>&1 </dev/null") != 0)
    GTEST_SKIP() << "script(1) cannot open a pseudo-terminal here";
  const std::string bin = SS_CLI_BINARY;
  auto b = run("timeout 120 script -qec \"" + bin + " bench -m " + test::shared("models/stories260K/stories260K.gguf") +
                   " --prefill 64 --positions 1500 --samples 4\" /dev/null < /dev/null",
               true, true);
  EXPECT_EQ(b.rc, 0) << b.out;
  EXPECT_NE(b.out.find("fast-forward"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("ETA"), std::string::npos) << b.out;
  const std::string out = test::temp_path("progress.gguf");
  auto q = run("timeout 120 script -qec \"" + bin + " quantize " + kModel + " " + out + " q8_0\" /dev/null < /dev/null",
               true, true);
  EXPECT_EQ(q.rc, 0) << q.out;
  EXPECT_NE(q.out.find("K weights/s ETA"), std::string::npos) << q.out;
  std::filesystem::remove(out);
}

// Every subcommand's --help is its own.
TEST(Chat, EverySubcommandHasItsOwnHelp) {
  const std::pair<std::string, std::string> cases[] = {
      {"chat", "/reset"},       {"quantize", "llama-quantize"}, {"convert", "--chat-template"},
      {"tokenize", "--ids"},    {"detokenize", "token ids"},    {"generate", "--n-predict"},
      {"bench", "--positions"}, {"perplexity", "--policy"},     {"serve", "--port"}};
  for (const auto& [sub, marker] : cases) {
    auto r = run(sub + " --help");
    EXPECT_EQ(r.rc, 0) << sub;
    EXPECT_NE(r.out.find(marker), std::string::npos) << sub << ": " << r.out.substr(0, 300);
    EXPECT_NE(r.out.find("sinkstream " + sub), std::string::npos) << sub << ": " << r.out.substr(0, 300);
  }
}

}  // namespace
}  // namespace ss
