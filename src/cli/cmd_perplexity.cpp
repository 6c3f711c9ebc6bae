#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/svg_plot.h"
#include "model/tokenizer.h"
#include "runtime/engine.h"
#include "runtime/scoring.h"
#include "util/atomic_file.h"
#include "util/mapped_file.h"

namespace ss::cli {

namespace {

Result<std::vector<int32_t>> read_token_file(const std::string& path) {
  SS_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  std::istringstream in(text);
  std::vector<int32_t> ids;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    char* end = nullptr;
    const long v = std::strtol(line.c_str(), &end, 10);
    if (end == line.c_str() || v < 0 || v > INT32_MAX)
      return make_error(path + ":" + std::to_string(lineno) + ": not a token id: '" + line + "'");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

std::string file_tag(const StreamMode& p) {
  std::string name = p.name();
  std::replace(name.begin(), name.end(), ':', '_');
  return name;
}

std::string expand_name(const std::string& pattern, const StreamMode& p, bool several) {
  const auto pos = pattern.find("{policy}");
  if (pos != std::string::npos) return pattern.substr(0, pos) + file_tag(p) + pattern.substr(pos + 8);
  if (!several) return pattern;
  const auto dot = pattern.find_last_of('.');
  return dot == std::string::npos ? pattern + "." + file_tag(p)
                                  : pattern.substr(0, dot) + "_" + file_tag(p) + pattern.substr(dot);
}

struct PolicyRun {
  StreamMode policy;
  std::vector<double> nll;
  double seconds = 0;
  size_t peak_kv_bytes = 0;
  double ppl() const {
    double s = 0;
    for (double x : nll) s += x;
    return nll.empty() ? 0 : std::exp(s / static_cast<double>(nll.size()));
  }
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::vector<double> segment_ppl(const std::vector<double>& nll, size_t seg) {
  std::vector<double> out;
  for (size_t b = 0; b < nll.size(); b += seg) {
    const size_t e = std::min(nll.size(), b + seg);
    double s = 0;
    for (size_t i = b; i < e; ++i) s += nll[i];
    out.push_back(std::exp(s / static_cast<double>(e - b)));
  }
  return out;
}

Status write_nll(const std::string& path, const PolicyRun& r) {
  std::ofstream out(path);
  if (!out) return make_error(path + ": cannot write");
  out << "# spec=" << r.policy.name() << " n=" << r.nll.size() << fmt(" ppl=%.6f\n", r.ppl());
  for (double x : r.nll) out << fmt("%.6f\n", x);
  if (!out) return make_error(path + ": write failed");
  return ok_status();
}

Status write_csv(const std::string& path, const std::vector<PolicyRun>& runs, const std::vector<int32_t>& tokens) {
  std::ofstream out(path);
  if (!out) return make_error(path + ": cannot write");
  out << "index,target";
  size_t n = 0;
  for (const auto& r : runs) {
    out << ",nll_" << file_tag(r.policy);
    n = std::max(n, r.nll.size());
  }
  out << "\n";
  for (size_t i = 0; i < n; ++i) {
    out << i << "," << tokens[i + 1];
    for (const auto& r : runs) out << "," << (i < r.nll.size() ? fmt("%.6f", r.nll[i]) : std::string());
    out << "\n";
  }
  if (!out) return make_error(path + ": write failed");
  return ok_status();
}

Status write_plot(const std::string& path, const std::vector<PolicyRun>& runs, const std::string& model_name) {
  LineChart chart;
  chart.title = "Perplexity over the stream — " + model_name;
  chart.x_label = "tokens";
  chart.y_label = "perplexity";
  chart.log_y = true;
  size_t n = 0;
  for (const auto& r : runs) n = std::max(n, r.nll.size());
  const size_t bin = std::max<size_t>(16, n / 50);
  for (const auto& r : runs) {
    Series s;
    s.name = r.policy.name();
    const auto seg = segment_ppl(r.nll, bin);
    for (size_t k = 0; k < seg.size(); ++k) {
      s.x.push_back(static_cast<double>(std::min(r.nll.size(), (k + 1) * bin)));
      s.y.push_back(seg[k]);
    }
    chart.series.push_back(std::move(s));
  }
  chart.title += " (perplexity per " + std::to_string(bin) + "-token segment)";
  return write_file_atomically(path, chart.render());
}

}  // namespace

PerplexityCommand::PerplexityCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "perplexity", "per-token NLL / perplexity of a long text under KV policies");
  model_.add(sub_);
  policy_.add(sub_, true);
  auto f = sub_.add("-f,--file", text_file_, "text file (TinyStories stories joined, or --raw)");
  auto tf = sub_.add("--tokens-file", tokens_file_, "token ids, one per line");
  f.excludes(tf);
  sub_.flag("--raw", raw_, "tokenize the file as-is instead of joining <|endoftext|> stories");
  sub_.add("--limit", limit_, "use at most N tokens").non_negative();
  sub_.add("--segment", segment_, "tokens per segment in the summary").positive().show_default();
  sub_.add("--nll-out", nll_out_, "write per-token NLL ({policy} in the name expands per policy)");
  sub_.add("--csv", csv_, "write per-token NLL of every policy as CSV");
  sub_.add("--plot", plot_, "write an SVG chart of perplexity against tokens");
}

int PerplexityCommand::run() {
  auto model_r = model_.load();
  if (!model_r.ok()) return fail(model_r.error().message);
  const auto model = model_r.value();
  std::vector<int32_t> tokens;
  if (!tokens_file_.empty()) {
    auto r = read_token_file(tokens_file_);
    if (!r.ok()) return fail(r.error().message);
    tokens = std::move(r.value());
  } else if (!text_file_.empty()) {
    auto r = read_eval_text(text_file_, raw_);
    if (!r.ok()) return fail(r.error().message);
    // BOS as the model's tokenizer adds it (llama.cpp's perplexity does the
    // same); GPT-NeoX/MPT-style vocabularies add none.
    tokens = Tokenizer(model->vocab).encode(r.value(), model->vocab.add_bos);
  } else {
    return fail("give -f TEXT or --tokens-file IDS");
  }
  if (limit_ > 0 && static_cast<size_t>(limit_) < tokens.size()) tokens.resize(static_cast<size_t>(limit_));
  if (tokens.size() < 2) return fail("need at least 2 tokens");
  for (int32_t t : tokens)
    if (t >= model->config.n_vocab) return fail("token id " + std::to_string(t) + " is outside the model's vocab");
  auto pols_r = policy_.resolve(model->config.trained_context);
  if (!pols_r.ok()) return fail(pols_r.error().message);
  const auto& pols = pols_r.value();

  auto eo_r = engine_options(model_, policy_, model->config);
  if (!eo_r.ok()) return fail(eo_r.error().message);
  std::vector<PolicyRun> runs;
  const bool tty = stderr_is_tty();
  for (const auto& pol : pols) {
    EngineOptions eo = eo_r.value();
    // Recompute scores up to 16 windows as one batch (runtime/scoring.h).
    if (pol.recompute())
      size_kv_pools(eo, model->config, KvPolicy::dense(), pol.recompute_len, 16);
    else
      size_kv_pools(eo, model->config, pol.policy, static_cast<int64_t>(tokens.size()));
    Engine engine(model, eo);
    PolicyRun run{pol, {}, 0, 0};
    Progress progress(pol.name(), tty);
    const auto t0 = std::chrono::steady_clock::now();
    auto nll_r = score_tokens(engine, tokens, pol, [&](int64_t done, int64_t total, double sum) {
      progress.update(done, total,
                      "ppl " + fmt("%.4f", std::exp(sum / static_cast<double>(std::max<int64_t>(done, 1)))));
    });
    progress.finish();
    if (!nll_r.ok()) return fail(pol.name() + ": " + nll_r.error().message);
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.nll = std::move(nll_r.value());
    run.peak_kv_bytes = engine.peak_kv_bytes();
    if (!nll_out_.empty())
      if (auto st = write_nll(expand_name(nll_out_, pol, pols.size() > 1), run); !st.ok())
        return fail(st.error().message);
    runs.push_back(std::move(run));
  }

  std::printf("%-16s %8s %12s %10s %12s  %s\n", "policy", "tokens", "perplexity", "tok/s", "peak KV",
              "ppl per segment");
  for (const auto& r : runs) {
    std::string segs;
    for (double v : segment_ppl(r.nll, static_cast<size_t>(segment_))) segs += fmt("%.3f ", v);
    std::printf("%-16s %8zu %12.6f %10.1f %9.1f KiB  %s\n", r.policy.name().c_str(), r.nll.size(), r.ppl(),
                static_cast<double>(r.nll.size()) / std::max(r.seconds, 1e-9),
                static_cast<double>(r.peak_kv_bytes) / 1024.0, segs.c_str());
  }
  std::printf("(segments of %lld tokens)\n", segment_);
  std::fflush(stdout);
  if (!csv_.empty())
    if (auto st = write_csv(csv_, runs, tokens); !st.ok()) return fail(st.error().message);
  if (!plot_.empty())
    if (auto st = write_plot(plot_, runs, model->source.substr(model->source.find_last_of('/') + 1)); !st.ok())
      return fail(st.error().message);
  return 0;
}

}  // namespace ss::cli
