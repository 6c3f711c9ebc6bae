#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "model/story_text.h"
#include "model/tokenizer.h"
#include "runtime/engine.h"
#include "runtime/scoring.h"
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

std::string expand_name(const std::string& pattern, const KvPolicy& p, bool several) {
  std::string name = p.name();
  for (char& ch : name)
    if (ch == ':') ch = '_';
  const auto pos = pattern.find("{policy}");
  if (pos != std::string::npos) return pattern.substr(0, pos) + name + pattern.substr(pos + 8);
  if (!several) return pattern;
  const auto dot = pattern.find_last_of('.');
  return dot == std::string::npos ? pattern + "." + name : pattern.substr(0, dot) + "_" + name + pattern.substr(dot);
}

}  // namespace

PerplexityCommand::PerplexityCommand(CLI::App& app) {
  sub_ = app.add_subcommand("perplexity", "per-token NLL / perplexity of a long text under KV policies");
  model_.add(*sub_);
  policy_.add(*sub_, true);
  auto* f = sub_->add_option("-f,--file", text_file_, "text file (TinyStories stories joined, or --raw)");
  auto* tf = sub_->add_option("--tokens-file", tokens_file_, "token ids, one per line");
  f->excludes(tf);
  sub_->add_flag("--raw", raw_, "tokenize the file as-is instead of joining <|endoftext|> stories");
  sub_->add_option("--limit", limit_, "use at most N tokens");
  sub_->add_option("--nll-out", nll_out_, "write per-token NLL ({policy} in the name expands per policy)");
}

int PerplexityCommand::run() {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "error: %s\n", m.c_str());
    return 1;
  };
  auto model_r = model_.load();
  if (!model_r.ok()) return fail(model_r.error().message);
  const auto model = model_r.value();
  std::vector<int32_t> tokens;
  if (!tokens_file_.empty()) {
    auto r = read_token_file(tokens_file_);
    if (!r.ok()) return fail(r.error().message);
    tokens = std::move(r.value());
  } else if (!text_file_.empty()) {
    auto r = read_text_file(text_file_);
    if (!r.ok()) return fail(r.error().message);
    const Tokenizer tok(model->vocab);
    tokens = tok.encode(raw_ ? r.value() : join_stories(r.value()), true);
  } else {
    return fail("give -f TEXT or --tokens-file IDS");
  }
  if (limit_ > 0 && static_cast<size_t>(limit_) < tokens.size()) tokens.resize(static_cast<size_t>(limit_));
  if (tokens.size() < 2) return fail("need at least 2 tokens");
  auto pols_r = policy_.resolve(model->config.trained_context);
  if (!pols_r.ok()) return fail(pols_r.error().message);
  const auto& pols = pols_r.value();

  std::printf("%-16s %10s %12s %12s\n", "policy", "tokens", "perplexity", "tok/s");
  for (const auto& pol : pols) {
    EngineOptions eo;
    eo.threads = model_.threads;
    eo.max_chunk = policy_.chunk;
    if (pol.kind == PolicyKind::Recompute)
      eo.kv_blocks = 16 * blocks_needed(KvPolicy::dense(), pol.recompute_len, eo.block_tokens, eo.max_chunk);
    else
      eo.kv_blocks = blocks_needed(pol, static_cast<int64_t>(tokens.size()), eo.block_tokens, eo.max_chunk);
    Engine engine(model, eo);
    const auto t0 = std::chrono::steady_clock::now();
    auto nll_r = score_tokens(engine, tokens, pol);
    if (!nll_r.ok()) return fail(pol.name() + ": " + nll_r.error().message);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& nll = nll_r.value();
    double sum = 0;
    for (double x : nll) sum += x;
    const double ppl = std::exp(sum / static_cast<double>(nll.size()));
    std::printf("%-16s %10zu %12.6f %12s\n", pol.name().c_str(), nll.size(), ppl,
                format_rate(static_cast<double>(nll.size()) / std::max(secs, 1e-9)).c_str());
    std::fflush(stdout);
    if (!nll_out_.empty()) {
      const std::string path = expand_name(nll_out_, pol, pols.size() > 1);
      std::ofstream out(path);
      if (!out) return fail(path + ": cannot write");
      char buf[64];
      out << "# spec=" << pol.name() << " n=" << nll.size();
      std::snprintf(buf, sizeof buf, " ppl=%.6f\n", ppl);
      out << buf;
      for (double x : nll) {
        std::snprintf(buf, sizeof buf, "%.6f\n", x);
        out << buf;
      }
      if (!out) return fail(path + ": write failed");
    }
  }
  return 0;
}

}  // namespace ss::cli
