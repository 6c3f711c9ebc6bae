#include <cmath>
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/svg_plot.h"
#include "model/tokenizer.h"
#include "runtime/attention_stats.h"
#include "runtime/engine.h"
#include "util/atomic_file.h"
#include "util/mapped_file.h"

namespace ss::cli {

AttentionCommand::AttentionCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "attention",
                           "inspect attention sinks: share of attention on the first tokens per layer/head");
  model_.add(sub_);
  policy_.add(sub_, true);
  auto p = sub_.add("-p,--prompt", prompt_, "text to run");
  auto f = sub_.add("-f,--file", file_, "text file (TinyStories stories joined, or --raw)");
  p.excludes(f);
  sub_.flag("--raw", raw_, "use the file as-is");
  sub_.add("--limit", limit_, "at most N tokens").positive().show_default();
  sub_.add("-k,--first-k", first_k_, "the first k tokens count as sinks").positive().show_default();
  sub_.add("--flag-ratio", flag_ratio_, "flag heads whose first-k share exceeds uniform by this factor").show_default();
  sub_.add("--layer", map_layer_, "layer for the key-position map").show_default();
  sub_.add("--head", map_head_, "head for the key-position map").show_default();
  sub_.add("--map-queries", map_queries_, "queries shown in the key-position map").show_default();
  sub_.add("--svg", svg_, "SVG heatmap: layers x heads, first-k share / uniform");
  sub_.add("--svg-map", svg_map_, "SVG heatmap: query x key cache position for --layer/--head");
  sub_.add("--kept", kept_,
           "SVG: which token positions each --policy keeps as the stream advances (sinks, window, heavy "
           "hitters; shaded by the share of layer/KV-head caches keeping them)");
  sub_.add("--kept-columns", kept_columns_, "stream positions sampled in --kept").range(2, 4096).show_default();
}

namespace {
// Runs the stream under each policy and samples what its cache holds.
Result<KeptChart> kept_chart(std::shared_ptr<const Model> model, const EngineOptions& base,
                             const std::vector<KvPolicy>& policies, const std::vector<int32_t>& tokens, int columns) {
  const auto& c = model->config;
  KeptChart chart;
  chart.title = "Kept token positions, " + model->source.substr(model->source.find_last_of('/') + 1);
  const size_t step = std::max<size_t>(1, tokens.size() / static_cast<size_t>(columns));
  for (const KvPolicy& pol : policies) {
    EngineOptions eo = base;
    eo.max_chunk = static_cast<int>(std::min<size_t>(step, 512));
    size_kv_pools(eo, c, pol, static_cast<int64_t>(tokens.size()));
    Engine engine(model, eo);
    SS_ASSIGN_OR_RETURN(const SeqId id, engine.create_sequence(pol));
    KeptPanel panel;
    panel.name = pol.name();
    std::vector<std::vector<float>> logits;
    const int lanes = c.full_layers() * c.n_kv_heads;
    for (size_t done = 0; done < tokens.size();) {
      const size_t n = std::min(step, tokens.size() - done);
      const BatchItem item{id, std::span<const int32_t>(tokens.data() + done, n), false};
      SS_TRY(engine.forward(std::span<const BatchItem>(&item, 1), logits));
      done += n;
      std::vector<std::pair<int64_t, float>> col;
      const SequenceKv& seq = *engine.sequence(id);
      if (pol.h2o()) {
        std::vector<int> count(done, 0);
        for (int i = 0; i < lanes; ++i)
          for (const auto& e : seq.lane(i).entries()) ++count[static_cast<size_t>(e.text)];
        for (size_t u = 0; u < done; ++u)
          if (count[u] > 0) col.emplace_back(static_cast<int64_t>(u), static_cast<float>(count[u]) / lanes);
      } else {
        for (int64_t u : seq.resident()) col.emplace_back(u, 1.0f);
      }
      panel.x.push_back(static_cast<int64_t>(done));
      panel.kept.push_back(std::move(col));
    }
    // Does the policy end up keeping the first token (a sink) by itself?
    const auto& last = panel.kept.back();
    const float first_share = !last.empty() && last[0].first == 0 ? last[0].second : 0.0f;
    std::printf("%-16s keeps %zu positions at the end; token 0 in %.0f%% of its caches\n", panel.name.c_str(),
                last.size(), 100.0 * first_share);
    chart.panels.push_back(std::move(panel));
  }
  return chart;
}
}  // namespace

int AttentionCommand::run() {
  auto model_r = model_.load();
  if (!model_r.ok()) return fail(model_r.error().message);
  const auto model = model_r.value();
  const auto& c = model->config;
  if (map_layer_ < 0 || map_layer_ >= c.n_layers || map_head_ < 0 || map_head_ >= c.n_heads)
    return fail("--layer/--head out of range (model has " + std::to_string(c.n_layers) + " layers, " +
                std::to_string(c.n_heads) + " heads)");
  std::string text = prompt_;
  if (!file_.empty()) {
    auto r = read_eval_text(file_, raw_);
    if (!r.ok()) return fail(r.error().message);
    text = std::move(r.value());
  }
  if (text.empty()) return fail("give -p TEXT or -f FILE");
  const Tokenizer tok(model->vocab);
  auto tokens = tok.encode(text, model->vocab.add_bos);
  if (static_cast<int64_t>(tokens.size()) > limit_) tokens.resize(static_cast<size_t>(limit_));
  std::vector<std::string> pols_spec = policy_.policies.empty() ? std::vector<std::string>{"dense"} : policy_.policies;
  std::vector<KvPolicy> pols;
  for (const auto& spec : pols_spec) {
    auto p = KvPolicy::parse(spec, c.trained_context);
    if (!p.ok()) return fail(p.error().message + "; attention inspection needs a cache policy");
    pols.push_back(p.value());
  }
  const KvPolicy& pol = pols[0];  // the inspector's

  auto eo_r = engine_options(model_, policy_, c);
  if (!eo_r.ok()) return fail(eo_r.error().message);
  EngineOptions eo = eo_r.value();
  if (!kept_.empty()) {
    auto chart = kept_chart(model, eo, pols, tokens, kept_columns_);
    if (!chart.ok()) return fail(chart.error().message);
    if (auto st = write_file_atomically(kept_, chart->render()); !st.ok()) return fail(st.error().message);
    std::printf("wrote %s: kept positions under %zu policies over %zu tokens\n", kept_.c_str(), pols.size(),
                tokens.size());
  }
  if (pol.h2o()) {
    if (!kept_.empty()) return 0;
    return fail(
        "the attention-share inspector needs a position-only policy (h2o keeps per-head caches); "
        "--kept draws what h2o keeps");
  }
  size_kv_pools(eo, c, pol, static_cast<int64_t>(tokens.size()));
  Engine engine(model, eo);
  AttentionStats stats(c.n_layers, c.n_heads, first_k_, map_layer_, map_head_, map_queries_);
  engine.set_attention_observer(&stats);
  const SeqId id = engine.create_sequence(pol).value();
  std::vector<std::vector<float>> logits;
  // In slices (the same computation: prefill is chunked anyway), so a long
  // text shows a bar with ETA on a terminal.
  std::optional<Progress> bar;
  constexpr size_t kSlice = 2048;
  if (stderr_is_tty() && tokens.size() > 2 * kSlice) bar.emplace("attention", true);
  for (size_t done = 0; done < tokens.size();) {
    const size_t n = std::min(kSlice, tokens.size() - done);
    const BatchItem item{id, std::span<const int32_t>(tokens.data() + done, n), false};
    if (auto st = engine.forward(std::span<const BatchItem>(&item, 1), logits); !st.ok())
      return fail(st.error().message);
    done += n;
    if (bar) bar->update(static_cast<int64_t>(done), static_cast<int64_t>(tokens.size()), "");
  }
  if (bar) bar->finish();
  const auto shares = stats.finish();

  std::printf("%zu tokens, policy %s, share of attention on the first %lld token(s)\n", tokens.size(),
              pol.name().c_str(), static_cast<long long>(first_k_));
  std::printf("%5s %5s %12s %12s %8s\n", "layer", "head", "first-k", "uniform", "ratio");
  int flagged = 0;
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h) {
      const auto& s = shares[static_cast<size_t>(l)][static_cast<size_t>(h)];
      const bool flag = s.ratio() >= flag_ratio_;
      flagged += flag;
      std::printf("%5d %5d %12.4f %12.4f %8.2f%s\n", l, h, s.first_k_share, s.uniform_share, s.ratio(),
                  flag ? "  <- sink head" : "");
    }
  std::printf("%d of %d heads put >= %.1fx the uniform share on the first %lld token(s)\n", flagged,
              c.n_layers * c.n_heads, flag_ratio_, static_cast<long long>(first_k_));
  if (!svg_.empty()) {
    Heatmap hm;
    hm.title = "Attention on the first " + std::to_string(first_k_) + " token(s) / uniform share";
    hm.x_label = "head";
    hm.y_label = "layer";
    hm.scale_label = "attention on them / their uniform share";
    for (int h = 0; h < c.n_heads; ++h) hm.col_labels.push_back(std::to_string(h));
    for (int l = 0; l < c.n_layers; ++l) {
      hm.row_labels.push_back("layer " + std::to_string(l));
      std::vector<double> row;
      for (int h = 0; h < c.n_heads; ++h) row.push_back(shares[static_cast<size_t>(l)][static_cast<size_t>(h)].ratio());
      hm.values.push_back(row);
    }
    if (auto st = write_file_atomically(svg_, hm.render()); !st.ok()) return fail(st.error().message);
  }
  if (!svg_map_.empty()) {
    Heatmap hm;
    hm.title = "Attention of layer " + std::to_string(map_layer_) + " head " + std::to_string(map_head_) +
               " by key cache position";
    hm.x_label = "key position in the cache";
    hm.y_label = "query";
    hm.scale_label = "attention probability";
    const auto& mp = stats.map();
    size_t cols = 0;
    for (const auto& r : mp) cols = std::max(cols, r.size());
    for (size_t q = 0; q < mp.size(); ++q) {
      hm.row_labels.push_back(q % 8 == 0 ? std::to_string(q) : "");
      std::vector<double> row(cols, 0.0);
      for (size_t j = 0; j < mp[q].size(); ++j) row[j] = mp[q][j];
      hm.values.push_back(row);
    }
    for (size_t j = 0; j < cols; ++j) hm.col_labels.push_back(std::to_string(j));
    if (auto st = write_file_atomically(svg_map_, hm.render(cols > 64 ? 8 : 14)); !st.ok())
      return fail(st.error().message);
  }
  return 0;
}

}  // namespace ss::cli
