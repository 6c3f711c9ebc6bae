// perplexity/attention reports: CSV equals --nll-out, the SVG is well-formed
// XML with one series per policy, the summary perplexity is exp(mean NLL) of
// the CSV, and progress output never reaches a piped stdout.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "test_paths.h"

namespace ss {
namespace {

struct Out {
  int rc;
  std::string out, err;
};

Out run(const std::string& args) {
  const std::string err_path = test::temp_path("stderr.txt");
  const std::string cmd = std::string(SS_CLI_BINARY) + " " + args + " 2>" + err_path;
  FILE* p = popen(cmd.c_str(), "r");  // stdout is a pipe, not a TTY
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  Out o{WIFEXITED(st) ? WEXITSTATUS(st) : -1, out, test::read_file(err_path)};
  std::remove(err_path.c_str());
  return o;
}

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) cells.push_back(c);
    rows.push_back(cells);
  }
  return rows;
}

TEST(Reports, PerplexityCsvNllSvgAndSummaryAgree) {
  const std::string csv = test::temp_path("ppl.csv"), svg = test::temp_path("ppl.svg"),
                    nll = test::temp_path("nll_{policy}.txt");
  const auto r = run("perplexity -m " + test::shared("models/stories260K/stories260K.gguf") + " -f " +
                     test::shared("data/tinystories-valid-dev.txt") +
                     " --limit 400 --policy window:64 --policy sinks:4:60 --segment 100 --csv " + csv + " --plot " +
                     svg + " --nll-out " + nll);
  ASSERT_EQ(r.rc, 0) << r.err;
  // Piped stdout holds only the table: no carriage returns or escape codes.
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
  EXPECT_EQ(r.out.find('\033'), std::string::npos);
  EXPECT_NE(r.out.find("sinks:4:60"), std::string::npos);
  // Progress went to stderr as plain lines (stderr is a file here, not a TTY).
  EXPECT_NE(r.err.find("100%"), std::string::npos);
  EXPECT_EQ(r.err.find('\r'), std::string::npos);

  const auto rows = read_csv(csv);
  ASSERT_EQ(rows.size(), 400u);  // header + 399 predictions
  ASSERT_EQ(rows[0], (std::vector<std::string>{"index", "target", "nll_window_64", "nll_sinks_4_60"}));
  for (int col = 2; col < 4; ++col) {
    const std::string tag = col == 2 ? "window_64" : "sinks_4_60";
    const std::string nll_path = test::temp_path("nll_" + tag + ".txt");
    const auto ref = test::read_nll(nll_path);
    std::remove(nll_path.c_str());
    ASSERT_EQ(ref.size(), 399u);
    double sum = 0;
    for (size_t i = 1; i < rows.size(); ++i) {
      const double v = std::stod(rows[i][static_cast<size_t>(col)]);
      EXPECT_NEAR(v, ref[i - 1], 1e-6);
      sum += v;
    }
    // Summary line: "<policy> <tokens> <perplexity> ..."
    const std::string name = col == 2 ? "window:64" : "sinks:4:60";
    const auto pos = r.out.find("\n" + name + " ");
    ASSERT_NE(pos, std::string::npos);
    std::istringstream line(r.out.substr(pos + 1));
    std::string pname;
    size_t tokens;
    double ppl;
    line >> pname >> tokens >> ppl;
    EXPECT_EQ(tokens, 399u);
    EXPECT_NEAR(ppl, std::exp(sum / 399.0), 1e-4 * ppl);
  }
  // The SVG is well-formed XML (xmllint) with one series per policy.
  EXPECT_EQ(std::system(("xmllint --noout " + svg).c_str()), 0);
  const std::string s = test::read_file(svg);
  size_t series = 0;
  for (size_t p = s.find("class=\"series\""); p != std::string::npos; p = s.find("class=\"series\"", p + 1)) ++series;
  EXPECT_EQ(series, 2u);
  EXPECT_NE(s.find("data-name=\"window:64\""), std::string::npos);
  EXPECT_NE(s.find("log scale"), std::string::npos);
  for (const auto& f : {csv, svg}) std::remove(f.c_str());
}

TEST(Reports, AttentionTableAndHeatmaps) {
  const std::string svg = test::temp_path("attn.svg"), map = test::temp_path("map.svg");
  const auto r = run("attention -m " + test::shared("models/tinystories-656k") + " -f " +
                     test::shared("data/tinystories-valid-dev.txt") + " --limit 200 --svg " + svg + " --svg-map " +
                     map + " --layer 1 --head 6");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("200 tokens"), std::string::npos);
  EXPECT_NE(r.out.find("sink head"), std::string::npos);  // this model has sink heads (see STREAMING.md)
  EXPECT_EQ(std::system(("xmllint --noout " + svg + " " + map).c_str()), 0);
  // Both heatmaps carry a colour scale from 0 to their maximum, labelled.
  const std::string a = test::read_file(svg), m = test::read_file(map);
  EXPECT_NE(a.find("<g id=\"colour-scale\">"), std::string::npos);
  EXPECT_NE(a.find("uniform share</text>"), std::string::npos);
  EXPECT_NE(m.find("<g id=\"colour-scale\">"), std::string::npos);
  EXPECT_NE(m.find("attention probability</text>"), std::string::npos);
  EXPECT_NE(m.find(">0</text>"), std::string::npos);
  for (const auto& f : {svg, map}) std::remove(f.c_str());
  const auto bad = run("attention -m " + test::shared("models/tinystories-656k") + " -p hello --layer 9");
  EXPECT_EQ(bad.rc, 1);
  // A heatmap that cannot be written is an error, not a silent success.
  const auto unwritable =
      run("attention -m " + test::shared("models/tinystories-656k") + " -p hello --svg /nonexistent/dir/a.svg");
  EXPECT_EQ(unwritable.rc, 1);
  EXPECT_NE(unwritable.err.find("/nonexistent/dir/a.svg"), std::string::npos) << unwritable.err;
}

// --kept: one panel per policy; position-only policies keep exactly their
// sinks + window, H2O more positions over its lanes; the SVG is well-formed.
// The inspector itself refuses h2o (per-head caches) with a clear error.
TEST(Reports, KeptPositionsPerPolicy) {
  const std::string svg = test::temp_path("kept.svg");
  const std::string base = "attention -m " + test::shared("models/tinystories-656k") + " -f " +
                           test::shared("data/tinystories-valid-dev.txt") + " --limit 300 --kv-type f32";
  const auto r =
      run(base + " --policy window:32 --policy sinks:4:28 --policy h2o:4:14:14 --kept " + svg + " --kept-columns 30");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("window:32        keeps 32 positions at the end; token 0 in 0%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sinks:4:28       keeps 32 positions at the end; token 0 in 100%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("h2o:4:14:14"), std::string::npos);
  const std::string s = test::read_file(svg);
  for (const char* name : {">window:32<", ">sinks:4:28<", ">h2o:4:14:14<"}) EXPECT_NE(s.find(name), std::string::npos);
  EXPECT_EQ(std::system(("xmllint --noout " + svg).c_str()), 0);
  std::remove(svg.c_str());
  const auto h2o = run(base + " --policy h2o:4:14:14");
  EXPECT_EQ(h2o.rc, 1);
  EXPECT_NE(h2o.err.find("--kept draws what h2o keeps"), std::string::npos) << h2o.err;
}

}  // namespace
}  // namespace ss
