#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "cli/progress.h"
#include "ops/bandwidth.h"
#include "ops/interleave.h"
#include "ops/kernel_report.h"
#include "runtime/engine.h"
#include "runtime/scoring.h"
#include "util/plain_loop.h"
#include "util/rss.h"

namespace ss::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

Result<std::vector<int64_t>> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return make_error("not a list of positive integers: '" + s + "'");
    }
  }
  return out;
}

struct DecodeSample {
  int64_t position;
  double p50_ms, p99_ms, tok_s;
  size_t rss, huge;
};

// What one decode step reads: every matrix once (as the kernels read it: the
// interleaved copy where there is one), one embedding row, in the order
// decode reads them; *bytes their sum.
std::vector<ByteRange> decode_weight_ranges(const Model& m, double* bytes) {
  std::vector<ByteRange> ranges;
  *bytes = 0;
  auto add = [&](const TensorView& t, int64_t rows) {
    if (t.empty()) return;
    const bool il = t.interleaved != nullptr;
    const size_t size = il ? interleaved_bytes(t) : row_bytes(t.type, t.ne0) * static_cast<size_t>(rows);
    ranges.push_back({il ? t.interleaved : t.data, size});
    *bytes += static_cast<double>(size);
  };
  add(m.tok_embd, 1);
  for (const auto& L : m.layers)
    for (const TensorView* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) add(*t, t->ne1);
  add(m.output, m.output.ne1);
  return ranges;
}

}  // namespace

BenchCommand::BenchCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "bench", "prefill/decode speed, per-token latency and memory along an endless stream");
  model_.add(sub_);
  policy_.add(sub_, false);
  sub_.add("--prefill", prefill_, "prompt lengths for prefill throughput").show_default();
  sub_.add("--positions", positions_, "stream positions at which decode is measured").show_default();
  sub_.add("--samples", samples_, "decode steps timed at each position").range(1, 1 << 20).show_default();
  sub_.add("--compare", compare_,
           "baseline to compare per-token time against: recompute:L, or another cache policy decoded in "
           "alternation at the first --positions position (e.g. h2o:4:126:126 against sinks:4:252)");
  sub_.add("--pair", pair_,
           "two stream positions A,B decoded in alternation (one step each, same machine state): "
           "per-token p50/p99 at B vs A, e.g. 10000,1000000");
  sub_.add("--kv-types", kv_types_,
           "KV cache types decoded in alternation at the first --positions position (one step each, same "
           "machine state): per-token p50 and KV bytes per token of each, e.g. f32,f16,bf16,q8_0,q4_0");
  sub_.add("--batch", batch_,
           "batched decode: sequence counts decoding together, e.g. 1,16,64 (aggregate tok/s vs the first)");
  sub_.add("--batch-context", batch_context_, "tokens each batched sequence holds before timing")
      .range(1, 1 << 20)
      .show_default();
  sub_.flag("--bandwidth", bandwidth_,
            "probe memory read bandwidth and report decode as a share of bandwidth / weight bytes per token; then "
            "--samples more decode steps, each followed by a plain sweep over the same weights (the paired "
            "share: median sweep time / step time)");
  sub_.flag("--host-floor", host_floor_,
            "after the decode positions, --samples more decode steps, each followed by a plain arithmetic loop as "
            "long as the last position's p50 step on every thread, joined, and by one plain sweep over the weights: "
            "the loop's p99/p50 is what this machine's CPUs add to any step of that length and thread count (timer "
            "ticks, preemption), the sweep's what its memory adds to reading what a step reads; the floors under "
            "decode's");
  sub_.add("--seed", seed_, "seed of the random token stream").show_default();
  sub_.flag("--json", json_, "print results as JSON");
}

int BenchCommand::run() {
  auto model_r = model_.load();
  if (!model_r.ok()) return fail(model_r.error().message);
  const auto model = model_r.value();
  auto pols = policy_.resolve(model->config.trained_context);
  if (!pols.ok()) return fail(pols.error().message);
  if (pols.value()[0].recompute()) return fail("bench the streaming policy; give recompute via --compare");
  const KvPolicy policy = pols.value()[0].policy;
  // What --bandwidth and --host-floor sweep (the weights where the loaded
  // model keeps them).
  double weight_bytes = 0;
  const std::vector<ByteRange> weight_ranges =
      bandwidth_ || host_floor_ ? decode_weight_ranges(*model, &weight_bytes) : std::vector<ByteRange>{};
  // The probe times whole 256-byte pieces of each tensor (ops/bandwidth.h).
  const bool sweepable =
      std::any_of(weight_ranges.begin(), weight_ranges.end(), [](const ByteRange& r) { return r.bytes >= 256; });
  // Said before any work, not as a division by zero after it.
  if (bandwidth_ && !sweepable)
    return fail("--bandwidth: every weight tensor of this model is under the probe's 256-byte piece; nothing to time");
  auto prefill = parse_list(prefill_);
  auto positions = parse_list(positions_);
  if (!prefill.ok()) return fail(prefill.error().message);
  if (!positions.ok()) return fail(positions.error().message);
  std::sort(positions->begin(), positions->end());
  Result<std::vector<int64_t>> at = std::vector<int64_t>{};
  if (!pair_.empty()) {
    at = parse_list(pair_);
    if (!at.ok()) return fail(at.error().message);
    if (at->size() != 2) return fail("--pair takes two positions A,B");
    if (!policy.bounded()) return fail("--pair needs a bounded policy (sinks or window)");
  }
  const int V = model->config.n_vocab;
  std::mt19937_64 rng(seed_);
  auto random_tokens = [&](size_t n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(V));
    return t;
  };

  auto eo_r = engine_options(model_, policy_, model->config);
  if (!eo_r.ok()) return fail(eo_r.error().message);
  EngineOptions eo = eo_r.value();
  const int64_t max_prefill = *std::max_element(prefill->begin(), prefill->end());
  const int64_t dense_tokens = policy.bounded() ? 0 : std::max<int64_t>(max_prefill, positions->back() + samples_);
  size_kv_pools(eo, model->config, policy, std::max<int64_t>(dense_tokens, max_prefill));
  Engine engine(model, eo);
  std::vector<std::vector<float>> logits;

  // Prefill throughput: fresh sequence per length, best of three.
  nlohmann::json out;
  out["model"] = model->source;
  out["policy"] = policy.name();
  out["threads"] = model_.threads;
  out["chunk"] = policy_.chunk;
  out["system_info"] = format_kernel_report(kernel_report());  // which kernels produced these numbers
  if (!json_)
    std::printf("model %s | policy %s | threads %d | chunk %d\n", model->source.c_str(), policy.name().c_str(),
                model_.threads, policy_.chunk);
  {
    // What one session holds at most: the full layers' sinks + window under
    // the policy, the sliding layers only their native window (kv/pool_sizing.h).
    const auto& c = model->config;
    const int full_blocks =
        blocks_per_sequence(policy, std::max<int64_t>(dense_tokens, max_prefill), eo.block_tokens, eo.max_chunk);
    const size_t full_bytes = static_cast<size_t>(full_blocks) * engine.pool().block_bytes();
    const int sw = c.sliding_window();
    const int swa_blocks =
        sw > 0 ? blocks_per_sequence(KvPolicy::sliding_layer(sw), 0, eo.block_tokens, eo.max_chunk) : 0;
    const size_t swa_bytes = sw > 0 ? static_cast<size_t>(swa_blocks) * engine.sliding_pool()->block_bytes() : 0;
    out["kv_per_session"] = {{"full_layers", c.full_layers()}, {"full_blocks", full_blocks},
                             {"full_bytes", full_bytes},       {"sliding_layers", c.n_layers - c.full_layers()},
                             {"sliding_window", sw},           {"sliding_blocks", swa_blocks},
                             {"sliding_bytes", swa_bytes},     {"bytes", full_bytes + swa_bytes}};
    if (!json_) {
      std::printf("KV per session: %d full layers x %s = %d blocks, %.1f KiB", c.full_layers(),
                  policy.bounded() ? ("(S+W+chunk) = " + policy.name()).c_str() : "all tokens", full_blocks,
                  full_bytes / 1024.0);
      if (sw > 0)
        std::printf(" + %d sliding layers x their window %d = %d blocks, %.1f KiB", c.n_layers - c.full_layers(), sw,
                    swa_blocks, swa_bytes / 1024.0);
      std::printf(" = %.1f KiB\n", (full_bytes + swa_bytes) / 1024.0);
    }
  }
  if (auto st = engine.check_policy(policy); !st.ok()) return fail(st.error().message);
  for (int64_t n : prefill.value()) {
    double best = 1e300;
    for (int rep = 0; rep < 3; ++rep) {
      const auto toks = random_tokens(static_cast<size_t>(n));
      const SeqId id = engine.create_sequence(policy).value();
      const BatchItem item{id, toks, false};
      const auto t0 = Clock::now();
      auto st = engine.forward(std::span<const BatchItem>(&item, 1), logits);
      const double ms = ms_since(t0);
      engine.free_sequence(id);
      if (!st.ok()) return fail(st.error().message);
      best = std::min(best, ms);
    }
    const double tps = static_cast<double>(n) / (best / 1000.0);
    out["prefill"].push_back({{"tokens", n}, {"tok_s", tps}});
    if (!json_) std::printf("prefill %8lld tokens: %10.1f tok/s\n", static_cast<long long>(n), tps);
  }

  // Decode along one endless stream: fast-forward by prefill, then time single steps.
  const SeqId id = engine.create_sequence(policy).value();
  int64_t pos = 0;
  std::vector<DecodeSample> samples;
  auto decode_steps = [&](int steps, std::vector<double>& lat) -> Status {
    int32_t tok = static_cast<int32_t>(rng() % static_cast<uint64_t>(V));
    for (int i = 0; i < steps; ++i) {
      const BatchItem item{id, std::span<const int32_t>(&tok, 1), false};
      const auto t0 = Clock::now();
      SS_TRY(engine.forward(std::span<const BatchItem>(&item, 1), logits));
      lat.push_back(ms_since(t0));
      tok = static_cast<int32_t>(std::max_element(logits[0].begin(), logits[0].end()) - logits[0].begin());
      ++pos;
    }
    return ok_status();
  };
  std::vector<double> warm;
  if (auto st = decode_steps(8, warm); !st.ok()) return fail(st.error().message);
  for (int64_t target : positions.value()) {
    // Reaching position 1M takes minutes: a bar with ETA on a terminal.
    std::optional<Progress> bar;
    if (stderr_is_tty() && target - pos > 1024) bar.emplace("to " + std::to_string(target), true);
    const int64_t from = pos;
    while (pos < target) {
      const auto toks = random_tokens(static_cast<size_t>(std::min<int64_t>(target - pos, 4096)));
      const BatchItem item{id, toks, false};
      if (auto st = engine.forward(std::span<const BatchItem>(&item, 1), logits); !st.ok())
        return fail(st.error().message);
      pos += static_cast<int64_t>(toks.size());
      if (bar) bar->update(pos - from, target - from, "fast-forward");
    }
    if (bar) bar->finish();
    std::vector<double> lat;
    if (auto st = decode_steps(samples_, lat); !st.ok()) return fail(st.error().message);
    double total = 0;
    for (double l : lat) total += l;
    DecodeSample s{target,
                   percentile(lat, 0.5),
                   percentile(lat, 0.99),
                   lat.size() / (total / 1000.0),
                   current_rss_bytes(),
                   anon_huge_page_bytes()};
    samples.push_back(s);
    out["decode"].push_back({{"position", s.position},
                             {"p50_ms", s.p50_ms},
                             {"p99_ms", s.p99_ms},
                             {"tok_s", s.tok_s},
                             {"rss_bytes", s.rss},
                             {"anon_huge_page_bytes", s.huge},
                             {"kv_blocks_used", engine.pool().used_blocks()},
                             {"kv_bytes_used", engine.used_kv_bytes()}});
    if (!json_)
      std::printf(
          "decode at %9lld: p50 %8.4f ms  p99 %8.4f ms  %10.1f tok/s  RSS %7.1f MiB  KV blocks %d  KV %.1f KiB  "
          "huge pages %.1f MiB\n",
          static_cast<long long>(s.position), s.p50_ms, s.p99_ms, s.tok_s, s.rss / 1048576.0,
          engine.pool().used_blocks(), engine.used_kv_bytes() / 1024.0, s.huge / 1048576.0);
  }

  if (!pair_.empty()) {
    // Two streams fast-forwarded to A and B, then one decode step each in
    // turn, so drift and noise of a shared machine fall on both alike.
    EngineOptions pe = eo;
    size_kv_pools(pe, model->config, policy, samples_ + 4096, 2);
    Engine paired(model, pe);
    SeqId ids[2];
    int32_t tok[2];
    for (int s = 0; s < 2; ++s) {
      ids[s] = paired.create_sequence(policy).value();
      for (int64_t p = 0; p < (*at)[s];) {
        const auto toks = random_tokens(static_cast<size_t>(std::min<int64_t>((*at)[s] - p, 4096)));
        const BatchItem item{ids[s], toks, false};
        if (auto st = paired.forward(std::span<const BatchItem>(&item, 1), logits); !st.ok())
          return fail(st.error().message);
        p += static_cast<int64_t>(toks.size());
      }
      tok[s] = static_cast<int32_t>(rng() % static_cast<uint64_t>(V));
    }
    std::vector<double> lat[2];
    for (int i = 0; i < samples_ + 8; ++i)
      for (int k = 0; k < 2; ++k) {
        const int s = (i + k) % 2;  // A first, then B first: neither always follows the other
        const BatchItem item{ids[s], std::span<const int32_t>(&tok[s], 1), false};
        const auto t0 = Clock::now();
        if (auto st = paired.forward(std::span<const BatchItem>(&item, 1), logits); !st.ok())
          return fail(st.error().message);
        if (i >= 8) lat[s].push_back(ms_since(t0));  // the first steps warm caches
        tok[s] = static_cast<int32_t>(std::max_element(logits[0].begin(), logits[0].end()) - logits[0].begin());
      }
    const double p50[2] = {percentile(lat[0], 0.5), percentile(lat[1], 0.5)};
    const double p99[2] = {percentile(lat[0], 0.99), percentile(lat[1], 0.99)};
    out["pair"] = {{"positions", {(*at)[0], (*at)[1]}},
                   {"p50_ms", {p50[0], p50[1]}},
                   {"p99_ms", {p99[0], p99[1]}},
                   {"p99_ratio", p99[1] / p99[0]},
                   {"p50_ratio", p50[1] / p50[0]}};
    if (!json_)
      std::printf(
          "alternating decode, %d steps each: position %lld p50 %.4f ms p99 %.4f ms | position %lld p50 %.4f ms p99 "
          "%.4f ms | p99 %+.1f%%, p50 %+.1f%%\n",
          samples_, static_cast<long long>((*at)[0]), p50[0], p99[0], static_cast<long long>((*at)[1]), p50[1], p99[1],
          100.0 * (p99[1] / p99[0] - 1), 100.0 * (p50[1] / p50[0] - 1));
  }

  // A stream under `pol` fed random tokens up to stream position `at_pos`.
  const auto ff_prompt = random_tokens(4096);
  auto fast_forward = [&](Engine& e, const KvPolicy& pol, int64_t at_pos) -> Result<SeqId> {
    SS_ASSIGN_OR_RETURN(const SeqId id, e.create_sequence(pol));
    std::optional<Progress> bar;
    if (stderr_is_tty() && at_pos > 4096) bar.emplace(pol.name(), true);
    for (int64_t p = 0; p < at_pos;) {
      const auto n = static_cast<size_t>(std::min<int64_t>(at_pos - p, static_cast<int64_t>(ff_prompt.size())));
      const BatchItem item{id, std::span<const int32_t>(ff_prompt.data(), n), false};
      SS_TRY(e.forward(std::span<const BatchItem>(&item, 1), logits));
      p += static_cast<int64_t>(n);
      if (bar) bar->update(p, at_pos, "fast-forward");
    }
    if (bar) bar->finish();
    return id;
  };
  // One engine per (options, policy), each with a stream fast-forwarded to
  // the first --positions position, ready for interleaved_decode.
  struct Streams {
    std::vector<std::unique_ptr<Engine>> engines;
    std::vector<SeqId> ids;
  };
  auto start_streams = [&](const std::vector<std::pair<EngineOptions, KvPolicy>>& setups) -> Result<Streams> {
    Streams s;
    for (const auto& [options, pol] : setups) {
      EngineOptions so = options;
      size_kv_pools(so, model->config, pol, std::max<int64_t>(dense_tokens, samples_ + 4096));
      s.engines.push_back(std::make_unique<Engine>(model, so));
      SS_ASSIGN_OR_RETURN(const SeqId id, fast_forward(*s.engines.back(), pol, positions->front()));
      s.ids.push_back(id);
    }
    return s;
  };
  // samples_ decode steps of each stream in turn, who goes first rotating,
  // so the machine's drift falls on all alike; per-step latencies (ms).
  auto interleaved_decode = [&](std::vector<std::unique_ptr<Engine>>& engines,
                                const std::vector<SeqId>& ids) -> Result<std::vector<std::vector<double>>> {
    const size_t K = engines.size();
    std::vector<std::vector<double>> lat(K);
    std::vector<int32_t> tok(K, static_cast<int32_t>(rng() % static_cast<uint64_t>(V)));
    for (int i = 0; i < samples_ + 8; ++i)
      for (size_t k = 0; k < K; ++k) {
        const size_t s = (static_cast<size_t>(i) + k) % K;
        const BatchItem item{ids[s], std::span<const int32_t>(&tok[s], 1), false};
        const auto t0 = Clock::now();
        SS_TRY(engines[s]->forward(std::span<const BatchItem>(&item, 1), logits));
        if (i >= 8) lat[s].push_back(ms_since(t0));  // the first steps warm caches
        tok[s] = static_cast<int32_t>(std::max_element(logits[0].begin(), logits[0].end()) - logits[0].begin());
      }
    return lat;
  };

  if (!kv_types_.empty()) {
    // One engine per type, each stream fast-forwarded to the same position
    // with the same tokens, then one decode step of each in turn (rotating
    // who goes first), so the machine's drift falls on all of them alike.
    std::vector<GgmlType> types;
    for (size_t b = 0; b <= kv_types_.size();) {
      const size_t e = std::min(kv_types_.find(',', b), kv_types_.size());
      auto t = parse_kv_type(kv_types_.substr(b, e - b));
      if (!t.ok()) return fail(t.error().message);
      if (auto u = kv_type_usable(t.value(), model->config.kv_dim()); !u.ok()) return fail(u.error().message);
      types.push_back(t.value());
      b = e + 1;
    }
    const int64_t at_pos = positions->front();
    std::vector<std::pair<EngineOptions, KvPolicy>> setups;
    for (GgmlType t : types) {
      setups.emplace_back(eo, policy);
      setups.back().first.kv_type = t;
    }
    auto streams = start_streams(setups);
    if (!streams.ok()) return fail(streams.error().message);
    auto& engines = streams->engines;
    const auto lat = interleaved_decode(engines, streams->ids);
    if (!lat.ok()) return fail(lat.error().message);
    const size_t K = types.size();
    const double base_p50 = percentile(lat.value()[0], 0.5);
    for (size_t k = 0; k < K; ++k) {
      const double p50 = percentile(lat.value()[k], 0.5);
      // Bytes one cached token takes in every layer (both pools).
      const Engine& e = *engines[k];
      double per_token = static_cast<double>(e.pool().block_bytes()) / e.pool().block_tokens();
      if (e.sliding_pool()) per_token += static_cast<double>(e.sliding_pool()->block_bytes()) / e.pool().block_tokens();
      out["kv_types"].push_back({{"type", kv_type_name(types[k])},
                                 {"position", at_pos},
                                 {"p50_ms", p50},
                                 {"tok_s", 1000.0 / p50},
                                 {"vs_first", base_p50 / p50},
                                 {"kv_bytes_per_token", per_token},
                                 {"kv_bytes_used", e.used_kv_bytes()}});
      if (!json_)
        std::printf(
            "kv %-5s decode at %lld: p50 %8.4f ms  %10.1f tok/s (%.2fx %s)  KV %7.1f bytes/token, %.1f KiB held\n",
            kv_type_name(types[k]).c_str(), static_cast<long long>(at_pos), p50, 1000.0 / p50, base_p50 / p50,
            kv_type_name(types[0]).c_str(), per_token, e.used_kv_bytes() / 1024.0);
    }
  }

  if (!batch_.empty()) {
    auto counts = parse_list(batch_);
    if (!counts.ok()) return fail(counts.error().message);
    const int64_t most = *std::max_element(counts->begin(), counts->end());
    EngineOptions be = eo;
    size_kv_pools(be, model->config, policy, batch_context_ + samples_, static_cast<int>(most));
    Engine batched(model, be);
    const int steps = std::max(4, std::min(samples_, 64));
    // B sequences: a random prompt each, then `steps` greedy decode steps
    // together; the decode steps' tokens per second.
    auto run_batch = [&](int64_t B) -> Result<double> {
      std::vector<SeqId> ids;
      std::vector<std::vector<int32_t>> prompts, next(static_cast<size_t>(B));
      for (int64_t b = 0; b < B; ++b) {
        ids.push_back(batched.create_sequence(policy).value());
        prompts.push_back(random_tokens(static_cast<size_t>(batch_context_)));
      }
      std::vector<BatchItem> items;
      for (int64_t b = 0; b < B; ++b) items.push_back({ids[b], prompts[b], false});
      Status st = batched.forward(items, logits);
      const auto t0 = Clock::now();
      for (int s = 0; s < steps && st.ok(); ++s) {
        items.clear();
        for (int64_t b = 0; b < B; ++b) {
          const auto& lg = logits[static_cast<size_t>(b)];
          next[b].assign(1, static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin()));
          items.push_back({ids[b], next[b], false});
        }
        st = batched.forward(items, logits);
      }
      const double ms = ms_since(t0);
      for (SeqId i : ids) batched.free_sequence(i);
      if (!st.ok()) return st.error();
      return static_cast<double>(B * steps) / (ms / 1000.0);
    };
    // One untimed round of the largest batch first, as a running server's
    // pool would be: its KV blocks' pages are committed on first use, which
    // would otherwise land in the timed steps of the largest batch only.
    if (auto warm = run_batch(most); !warm.ok()) return fail(warm.error().message);
    double base = 0;
    for (int64_t B : counts.value()) {
      auto measured = run_batch(B);
      if (!measured.ok()) return fail(measured.error().message);
      const double tps = measured.value();
      if (base == 0) base = tps;
      out["batch"].push_back({{"sequences", B}, {"aggregate_tok_s", tps}, {"vs_first", tps / base}});
      if (!json_)
        std::printf("batched decode %4lld sequences (context %d): %10.1f tok/s aggregate (%.2fx the first)\n",
                    static_cast<long long>(B), batch_context_, tps, tps / base);
    }
  }

  if (host_floor_ && !samples.empty()) {
    // Step and loop in alternation, so both see the same minutes of a
    // shared machine. The loop runs on every engine thread and is joined as
    // a step is: with N threads a step waits for the most delayed of N cores.
    // The sweep is one plain pass (not the fastest of several, as
    // --bandwidth's paired sweeps are): a decode step that reads at the
    // memory's pace slows with it, in the same minutes, on a shared host.
    const PlainLoop loop(samples.back().p50_ms);
    ThreadPool& pool = engine.threads();
    std::vector<double> step_ms, loop_ms, sweep_ms;  // no sweeps where nothing is sweepable
    const int64_t from = pos;
    for (int i = 0; i < samples_; ++i) {
      if (auto st = decode_steps(1, step_ms); !st.ok()) return fail(st.error().message);
      const auto t0 = Clock::now();
      pool.parallel_for(static_cast<size_t>(pool.size()), [&](size_t b, size_t e) {
        for (size_t k = b; k < e; ++k) loop.run();
      });
      loop_ms.push_back(ms_since(t0));
      if (!sweepable) continue;
      const auto t1 = Clock::now();
      read_sweep(pool, weight_ranges, ReadMethod::Plain);
      sweep_ms.push_back(ms_since(t1));
    }
    const double sp50 = percentile(step_ms, 0.5), sp99 = percentile(step_ms, 0.99);
    const double lp50 = percentile(loop_ms, 0.5), lp99 = percentile(loop_ms, 0.99);
    out["host_floor"] = {{"position", from},    {"pairs", samples_},         {"step_p50_ms", sp50},
                         {"step_p99_ms", sp99}, {"step_ratio", sp99 / sp50}, {"loop_p50_ms", lp50},
                         {"loop_p99_ms", lp99}, {"loop_ratio", lp99 / lp50}};
    std::string sweep_text = "no sweep (every weight tensor is under the probe's 256-byte piece)";
    if (sweepable) {
      const double wp50 = percentile(sweep_ms, 0.5), wp99 = percentile(sweep_ms, 0.99);
      out["host_floor"].update({{"sweep_p50_ms", wp50},
                                {"sweep_p99_ms", wp99},
                                {"sweep_ratio", wp99 / wp50},
                                {"sweep_bytes", weight_bytes}});
      char buf[128];
      std::snprintf(buf, sizeof buf, "sweep p50 %.4f ms p99 %.4f ms (p99/p50 %.2f)", wp50, wp99, wp99 / wp50);
      sweep_text = buf;
    }
    if (!json_)
      std::printf(
          "host floor (%d decode steps from position %lld, each followed by a plain loop on each thread and a plain "
          "sweep over the weights): step p50 %.4f ms p99 %.4f ms (p99/p50 %.2f) | loop p50 %.4f ms p99 %.4f ms "
          "(p99/p50 %.2f) | %s\n",
          samples_, static_cast<long long>(from), sp50, sp99, sp99 / sp50, lp50, lp99, lp99 / lp50, sweep_text.c_str());
  }

  if (bandwidth_) {
    const std::vector<ByteRange>& ranges = weight_ranges;
    const double bytes = weight_bytes;
    // The weights where they lie, summed as a plain streaming read, as two
    // streams per thread (with software prefetch and without) and four
    // (without), and a fresh buffer (every way): the ceiling takes the
    // fastest.
    const double bw_plain = measure_read_bandwidth(engine.threads(), ranges, 5, ReadMethod::Plain);
    const double bw_two = measure_read_bandwidth(engine.threads(), ranges, 5, ReadMethod::TwoStreams);
    const double bw_bare = measure_read_bandwidth(engine.threads(), ranges, 5, ReadMethod::TwoBareStreams);
    const double bw_four = measure_read_bandwidth(engine.threads(), ranges, 5, ReadMethod::FourBareStreams);
    const double bw_weights = std::max({bw_plain, bw_two, bw_bare, bw_four});
    const double bw_fresh = measure_read_bandwidth(engine.threads(), std::max<size_t>(size_t{1} << 30, 2 * bytes));
    const double bw = std::max(bw_weights, bw_fresh);
    const double ceiling = bw / bytes;
    const double measured = samples.empty() ? 0 : samples.front().tok_s;
    out["bandwidth"] = {{"read_bytes_per_s", bw},
                        {"weights_read_bytes_per_s", bw_weights},
                        {"weights_plain_read_bytes_per_s", bw_plain},
                        {"weights_two_stream_read_bytes_per_s", bw_two},
                        {"weights_two_bare_stream_read_bytes_per_s", bw_bare},
                        {"weights_four_bare_stream_read_bytes_per_s", bw_four},
                        {"fresh_buffer_read_bytes_per_s", bw_fresh},
                        {"weight_bytes_per_token", bytes},
                        {"ceiling_tok_s", ceiling},
                        {"decode_tok_s", measured},
                        {"share_of_ceiling", measured / ceiling}};
    if (!json_)
      std::printf(
          "bandwidth: read %.2f GB/s (%d threads; over the weights a plain sum %.2f, two prefetched streams per "
          "thread %.2f, two without prefetch %.2f, four %.2f; over a fresh buffer %.2f); weights %.1f MiB per token -> "
          "ceiling %.2f tok/s; decode at position %lld: %.2f tok/s = %.0f%% of the ceiling\n",
          bw / 1e9, model_.threads, bw_plain / 1e9, bw_two / 1e9, bw_bare / 1e9, bw_four / 1e9, bw_fresh / 1e9,
          bytes / 1048576.0, ceiling, samples.empty() ? 0LL : static_cast<long long>(samples.front().position),
          measured, 100.0 * measured / ceiling);

    // The same comparison in one machine state: each decode step followed by
    // a sweep over its weights each way on the engine's own threads (the
    // fastest counts), so a shared VM's drift in memory speed (here 30-40 GB/s
    // from one minute to the next on one thread) falls on both alike. Share =
    // sweep time / step time, the median over the pairs.
    std::vector<double> step_ms, sweep_ms, shares;
    const int64_t paired_from = pos;
    for (int i = 0; i < samples_ + 4; ++i) {
      std::vector<double> lat;
      if (auto st = decode_steps(1, lat); !st.ok()) return fail(st.error().message);
      const double sweep = bytes / measure_read_bandwidth(engine.threads(), ranges, 1) * 1000.0;
      if (i < 4) continue;  // the first pairs warm caches and wake threads
      step_ms.push_back(lat.front());
      sweep_ms.push_back(sweep);
      shares.push_back(sweep / lat.front());
    }
    const double share = percentile(shares, 0.5), step_p50 = percentile(step_ms, 0.5),
                 sweep_p50 = percentile(sweep_ms, 0.5);
    out["bandwidth"]["paired"] = {{"position", paired_from},
                                  {"pairs", shares.size()},
                                  {"step_p50_ms", step_p50},
                                  {"sweep_p50_ms", sweep_p50},
                                  {"sweep_read_bytes_per_s", bytes / (sweep_p50 / 1000.0)},
                                  {"share_p50", share},
                                  {"share_p10", percentile(shares, 0.1)},
                                  {"share_p90", percentile(shares, 0.9)}};
    // The tails side by side: a step reads what a sweep reads, so a sweep's
    // p99/p50 is the memory's own (the VM's drifting speed), as
    // --host-floor's loop is the CPU's. The fastest of four sweeps: if
    // anything it understates the memory's tail.
    const double step_tail = percentile(step_ms, 0.99) / step_p50, sweep_tail = percentile(sweep_ms, 0.99) / sweep_p50;
    out["bandwidth"]["paired"]["step_p99_over_p50"] = step_tail;
    out["bandwidth"]["paired"]["sweep_p99_over_p50"] = sweep_tail;
    if (!json_)
      std::printf(
          "bandwidth, paired (the fastest of four sweeps over the weights after each of %zu decode steps at position "
          "%lld): step p50 %.3f ms, sweep p50 %.3f ms (%.2f GB/s); decode = %.0f%% of the sweep's speed (median of "
          "the pairs; p10 %.0f%%, p90 %.0f%%); p99/p50 step %.2f, sweep %.2f\n",
          shares.size(), static_cast<long long>(paired_from), step_p50, sweep_p50, bytes / (sweep_p50 / 1000.0) / 1e9,
          100.0 * share, 100.0 * percentile(shares, 0.1), 100.0 * percentile(shares, 0.9), step_tail, sweep_tail);
  }
  engine.free_sequence(id);

  if (!compare_.empty()) {
    auto base = StreamMode::parse(compare_, model->config.trained_context);
    if (!base.ok()) return fail(base.error().message);
    if (!base->recompute()) {
      // Another cache policy (h2o against sinks at one budget): both streams
      // at the first --positions position, decoded in alternation.
      const int64_t at_pos = positions->front();
      auto streams = start_streams({{eo, policy}, {eo, base->policy}});
      if (!streams.ok()) return fail(streams.error().message);
      const auto lat = interleaved_decode(streams->engines, streams->ids);
      if (!lat.ok()) return fail(lat.error().message);
      const double ours = percentile(lat.value()[0], 0.5), theirs = percentile(lat.value()[1], 0.5);
      out["compare"] = {{"policy", base->name()},
                        {"position", at_pos},
                        {"p50_ms", theirs},
                        {"ours_p50_ms", ours},
                        {"speedup_p50", theirs / ours}};
      if (!json_)
        std::printf(
            "alternating decode at %lld, %d steps each: %s p50 %.4f ms, %s p50 %.4f ms -> %s takes %.2fx the "
            "time per token\n",
            static_cast<long long>(at_pos), samples_, policy.name().c_str(), ours, base->name().c_str(), theirs,
            base->name().c_str(), theirs / ours);
      if (json_) std::printf("%s\n", out.dump(2).c_str());
      return 0;
    }
    const int64_t L = base->recompute_len;
    EngineOptions be = eo;
    size_kv_pools(be, model->config, KvPolicy::dense(), L);
    Engine baseline(model, be);
    const auto window = random_tokens(static_cast<size_t>(L));
    std::vector<double> lat;
    for (int i = 0; i < std::min(samples_, 64); ++i) {
      const auto t0 = Clock::now();
      auto lg = recompute_logits(baseline, window);
      if (!lg.ok()) return fail(lg.error().message);
      lat.push_back(ms_since(t0));
    }
    const double p50 = percentile(lat, 0.5), ours = samples.empty() ? 0 : samples.front().p50_ms;
    out["compare"] = {{"policy", base->name()}, {"p50_ms", p50}, {"speedup_p50", ours > 0 ? p50 / ours : 0}};
    if (!json_)
      std::printf("%s per token: p50 %.4f ms -> %s is %.1fx faster per token (p50 at position %lld)\n",
                  base->name().c_str(), p50, policy.name().c_str(), ours > 0 ? p50 / ours : 0.0,
                  samples.empty() ? 0LL : static_cast<long long>(samples.front().position));
  }
  if (json_) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace ss::cli
