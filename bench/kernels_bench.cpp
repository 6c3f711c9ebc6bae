// Google Benchmark micro-benchmarks of the CPU kernels (GFLOP/s, GB/s) and a
// STREAM-triad memory-bandwidth probe. Run: build/release/bench/kernels_bench
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "format/ggml_types.h"
#include "ops/attention.h"
#include "ops/bandwidth.h"
#include "ops/interleave.h"
#include "ops/matmul.h"
#include "ops/matmul_bf16.h"
#include "ops/matmul_int8.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// rows x cols random weights in [-1, 1) quantized to `type`, row after row.
std::vector<uint8_t> random_matrix(ss::GgmlType type, int64_t rows, int64_t cols) {
  const auto wf = random_floats(static_cast<size_t>(rows * cols));
  const size_t rb = ss::row_bytes(type, cols);
  std::vector<uint8_t> wq(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) ss::quantize_row(type, wf.data() + r * cols, wq.data() + r * rb, cols);
  return wq;
}

// GEMV/GEMM: rows x cols weights of a type (range 0-2), batch of n
// activation rows (range 3), activations as `aq` says.
void run_matmul(benchmark::State& st, ss::ActQuant aq, bool interleaved = false) {
  const auto type = static_cast<ss::GgmlType>(st.range(0));
  const int64_t rows = st.range(1), cols = st.range(2);
  const int n = static_cast<int>(st.range(3));
  const std::vector<uint8_t> wq = random_matrix(type, rows, cols);
  ss::TensorView w;
  w.type = type;
  w.ne0 = cols;
  w.ne1 = rows;
  w.data = wq.data();
  std::string label = ss::type_name(static_cast<uint32_t>(type));
  std::vector<uint8_t> copy;
  if (interleaved) {  // the layout the engine gives these types under int8
    copy.resize(ss::interleaved_bytes(w));
    ss::interleave(w, copy.data());
    w.interleaved = copy.data();
    label += " interleaved";
  }
  if (aq == ss::ActQuant::Int8) {
    if (!ss::int8_matmul_supported(w)) {
      st.SkipWithError("no int8 kernel on this CPU");
      return;
    }
    label += std::string(" ") + ss::int8_kernels();
  } else if (aq == ss::ActQuant::Fast) {
    if (!ss::bf16_matmul_supported(w)) {
      st.SkipWithError("no AMX-BF16 on this CPU");
      return;
    }
    label += " amx-bf16";
  }
  const auto x = random_floats(static_cast<size_t>(n * cols), 2);
  std::vector<float> y(static_cast<size_t>(n * rows));
  ss::ThreadPool pool(1);
  for (auto _ : st) {
    ss::matmul(w, x.data(), n, y.data(), pool, aq);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * n * st.iterations(), benchmark::Counter::kIsRate);
  st.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(wq.size()) * st.iterations(), benchmark::Counter::kIsRate);
  st.SetLabel(label);
}

void BM_Matmul(benchmark::State& st) { run_matmul(st, ss::ActQuant::None); }

void MatmulArgs(benchmark::internal::Benchmark* b) {
  for (int t : {0, 1, 30, 8, 2, 12, 13, 14})  // F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K
    for (auto shape : {std::pair{512, 256}, std::pair{2048, 2048}})
      for (int n : {1, 16}) b->Args({t, shape.first, shape.second, n});
}
BENCHMARK(BM_Matmul)->Apply(MatmulArgs);
// Q4_0 / Q8_0 / Q4_K with int8 activations (ActQuant::Int8): VNNI for n < 4,
// AMX tiles above where the CPU has them.
void BM_MatmulInt8(benchmark::State& st) { run_matmul(st, ss::ActQuant::Int8); }
BENCHMARK(BM_MatmulInt8)->ArgsProduct({{8, 2, 12, 13, 14}, {2048}, {2048}, {1, 16, 64}});
BENCHMARK(BM_MatmulInt8)->Args({2, 5632, 2048, 64})->Args({2, 2048, 5632, 64});
// Q4_0, Q8_0 and the K-quants from their interleaved copies (ops/interleave.h),
// as the engine reads them.
void BM_MatmulInt8Interleaved(benchmark::State& st) { run_matmul(st, ss::ActQuant::Int8, true); }
BENCHMARK(BM_MatmulInt8Interleaved)->ArgsProduct({{2}, {2048}, {2048}, {1, 8, 16, 32, 64, 128, 256}});
BENCHMARK(BM_MatmulInt8Interleaved)->ArgsProduct({{8, 12, 13, 14}, {2048}, {2048}, {1, 8, 16, 32, 64, 128, 256}});
BENCHMARK(BM_MatmulInt8Interleaved)->Args({2, 5632, 2048, 1})->Args({2, 2048, 5632, 1});
// One activation row against 256 x 2048 weights (0.3-0.5 MB: held in L2):
// the kernels' compute rate with memory out of the way, which one-thread
// decode must beat by a margin to run at the speed memory delivers.
BENCHMARK(BM_MatmulInt8Interleaved)->ArgsProduct({{2, 8, 12, 13, 14}, {256}, {2048}, {1}});
// And against 32768 x 2048 weights (38-71 MB: beyond a Zen 5 CCD's 32 MB L3), as
// one-thread decode meets them: how close each type's GEMV comes to the
// memory's read rate (compare `sinkstream bench --bandwidth`).
BENCHMARK(BM_MatmulInt8Interleaved)->ArgsProduct({{2, 8, 12, 13, 14}, {32768}, {2048}, {1}});
// Short rows (768: Pythia-160M, GPT-2 small) from memory and from L2: the
// per-row work (sums across lanes, scales, stores) against fewer blocks.
BENCHMARK(BM_MatmulInt8Interleaved)->ArgsProduct({{2, 8}, {87040, 768}, {768}, {1}});
BENCHMARK(BM_MatmulInt8)->Args({2, 5632, 2048, 1})->Args({2, 2048, 5632, 1});
// stories260K's matrices as one decode step meets them (five layers of q
// 64x64, k and v 32x64, o 64x64, gate and up 172x64, down 64x172, then the
// 512x64 classifier: 1.04 MB of F32), one activation row on one thread: the
// F32 kernels on small rows (64 and 172 wide, tails included) with the
// weights in L2 as far as they fit, no attention and no engine around them.
void BM_Stories260KMatmuls(benchmark::State& st) {
  static const std::pair<int64_t, int64_t> kLayer[] = {{64, 64},  {32, 64},  {32, 64}, {64, 64},
                                                       {172, 64}, {172, 64}, {64, 172}};
  std::vector<std::vector<uint8_t>> store;
  std::vector<ss::TensorView> mats;
  auto add = [&](int64_t rows, int64_t cols) {
    store.push_back(random_matrix(ss::GgmlType::F32, rows, cols));
    ss::TensorView w;
    w.type = ss::GgmlType::F32;
    w.ne0 = cols;
    w.ne1 = rows;
    w.data = store.back().data();
    mats.push_back(w);
  };
  for (int l = 0; l < 5; ++l)
    for (const auto& [rows, cols] : kLayer) add(rows, cols);
  add(512, 64);
  size_t bytes = 0;
  for (const auto& m : store) bytes += m.size();
  const auto x = random_floats(172, 2);
  std::vector<float> y(512);
  ss::ThreadPool pool(1);
  for (auto _ : st) {
    for (const auto& w : mats) ss::matmul(w, x.data(), 1, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * st.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Stories260KMatmuls)->Unit(benchmark::kMicrosecond);

// One decode step's matrix sweep from memory, not cache: range(1) layers of
// TinyLlama's shapes (q, k, v, o, gate, up, down: 2048 x 2048, 256 x 2048
// twice, 2048 x 2048, 5632 x 2048 twice, 2048 x 5632; 20-37 MB a layer),
// interleaved, one activation row against each in turn on one thread, as the
// engine runs them, alternating with the read probe over the same bytes: the
// share (read time / kernel time) says how far the kernels trail memory.
struct DecodeLayers {
  std::vector<ss::TensorView> mats;
  std::shared_ptr<uint8_t> arena;  // the interleaved copies, in huge pages as the engine keeps them
  std::vector<std::pair<const uint8_t*, size_t>> bytes;
};
DecodeLayers decode_layers(ss::GgmlType type, int layers) {
  static const std::pair<int64_t, int64_t> kShapes[] = {{2048, 2048}, {256, 2048},  {256, 2048}, {2048, 2048},
                                                        {5632, 2048}, {5632, 2048}, {2048, 5632}};
  DecodeLayers d;
  std::vector<std::vector<uint8_t>> plain;  // quantized once, interleaved into every layer
  for (const auto& [rows, cols] : kShapes) plain.push_back(random_matrix(type, rows, cols));
  std::vector<ss::TensorView> layer;
  size_t layer_bytes = 0;
  for (size_t i = 0; i < std::size(kShapes); ++i) {
    ss::TensorView w;
    w.type = type;
    w.ne0 = kShapes[i].second;
    w.ne1 = kShapes[i].first;
    w.data = plain[i].data();
    layer.push_back(w);
    layer_bytes += ss::interleaved_bytes(w);
  }
  d.arena = ss::allocate_huge(layer_bytes * static_cast<size_t>(layers));
  uint8_t* at = d.arena.get();
  for (int l = 0; l < layers; ++l)
    for (ss::TensorView w : layer) {
      const size_t size = ss::interleaved_bytes(w);
      ss::interleave(w, at);
      w.interleaved = at;
      w.data = nullptr;  // only the interleaved copy is read
      d.bytes.emplace_back(at, size);
      d.mats.push_back(w);
      at += size;
    }
  return d;
}
void BM_DecodeSweep(benchmark::State& st) {
  const auto type = static_cast<ss::GgmlType>(st.range(0));
  ss::TensorView probe;  // the q shape: whether the engine reads this type interleaved here
  probe.type = type;
  probe.ne0 = probe.ne1 = 2048;
  if (ss::int8_layout(probe) != ss::Int8Layout::Interleaved) {
    st.SkipWithError("the engine does not interleave this type on this CPU");
    return;
  }
  const DecodeLayers d = decode_layers(type, static_cast<int>(st.range(1)));
  const auto x = random_floats(5632, 2);
  std::vector<float> y(5632);
  std::vector<ss::ByteRange> ranges;
  size_t bytes = 0;
  for (const auto& b : d.bytes) {
    ranges.push_back({b.first, b.second});
    bytes += b.second;
  }
  ss::ThreadPool pool(1);
  // Each iteration: the kernels' sweep, then the probe's over the same
  // bytes, so a shared machine's drift in memory speed falls on both.
  double kernel_s = 0, read_s = 0;
  using Clock = std::chrono::steady_clock;
  for (auto _ : st) {
    const auto t0 = Clock::now();
    for (const auto& w : d.mats) {
      ss::matmul(w, x.data(), 1, y.data(), pool, ss::ActQuant::Int8);
      benchmark::DoNotOptimize(y.data());
    }
    kernel_s += std::chrono::duration<double>(Clock::now() - t0).count();
    // The fastest of a plain sweep, two streams with and without prefetch
    // and four without (ops/bandwidth.h).
    read_s += static_cast<double>(bytes) / ss::measure_read_bandwidth(pool, ranges, 1);
  }
  const double n = static_cast<double>(st.iterations());
  st.counters["kernel_GB/s"] = static_cast<double>(bytes) * n / kernel_s / 1e9;
  st.counters["read_GB/s"] = static_cast<double>(bytes) * n / read_s / 1e9;
  st.counters["share"] = read_s / kernel_s;
  st.SetLabel(std::string(ss::type_name(static_cast<uint32_t>(type))) + " " + ss::int8_kernels());
}
BENCHMARK(BM_DecodeSweep)->ArgsProduct({{2, 8, 12, 13, 14}, {4}})->Unit(benchmark::kMillisecond);

// The same batches as bf16 tiles (ActQuant::Fast, 4+ rows).
void BM_MatmulFast(benchmark::State& st) { run_matmul(st, ss::ActQuant::Fast); }
BENCHMARK(BM_MatmulFast)->ArgsProduct({{8, 2}, {2048}, {2048}, {16, 64}});
BENCHMARK(BM_MatmulFast)->Args({2, 5632, 2048, 64})->Args({2, 2048, 5632, 64});
void BM_MatmulFastInterleaved(benchmark::State& st) { run_matmul(st, ss::ActQuant::Fast, true); }
BENCHMARK(BM_MatmulFastInterleaved)->ArgsProduct({{2, 8}, {2048}, {2048}, {8, 16, 32, 64, 128, 256}});

// stories260K's F32 shapes (rows x cols): q/o, gate/up, down, output.
BENCHMARK(BM_Matmul)->Args({0, 64, 64, 1})->Args({0, 172, 64, 1})->Args({0, 64, 172, 1})->Args({0, 512, 64, 1});

void BM_AttentionScores(benchmark::State& st) {
  const int hd = static_cast<int>(st.range(0)), keys = static_cast<int>(st.range(1));
  const auto q = random_floats(static_cast<size_t>(hd));
  const auto k = random_floats(static_cast<size_t>(hd * keys), 3);  // dimension-major: [hd][keys]
  std::vector<float> s(static_cast<size_t>(keys));
  for (auto _ : st) {
    ss::attn_scores(q.data(), k.data(), keys, keys, hd, 0.125f, s.data());
    ss::softmax(s.data(), keys);
    benchmark::DoNotOptimize(s.data());
  }
  st.counters["keys/s"] = benchmark::Counter(static_cast<double>(keys) * st.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionScores)->Args({8, 512})->Args({64, 512})->Args({128, 4096});

// The engine's fused kernel: online softmax over 16-key blocks, GQA group of g.
void BM_AttentionFused(benchmark::State& st) {
  const int hd = static_cast<int>(st.range(0)), keys = static_cast<int>(st.range(1)), g = static_cast<int>(st.range(2));
  const int stride = hd * 4;
  const auto q = random_floats(static_cast<size_t>(hd * g));
  const auto k = random_floats(static_cast<size_t>(stride * keys), 3);
  const auto v = random_floats(static_cast<size_t>(stride * keys), 5);
  std::vector<float> m(g), l(g), acc(static_cast<size_t>(g * hd)), out(acc.size()),
      scratch(static_cast<size_t>(ss::attn_scratch_floats(g, hd)));
  // Blocks as in the KV pool: 16 keys, K [stride][16] then V [16][stride]; KV head 0.
  for (auto _ : st) {
    ss::attn_online_init(g, hd, m.data(), l.data(), acc.data());
    for (int r = 0; r < keys; r += 16)
      ss::attn_online_update(q.data(), g, k.data() + static_cast<size_t>(r) * stride, 16,
                             v.data() + static_cast<size_t>(r) * stride, stride, 0, std::min(16, keys - r), hd, 0.125f,
                             m.data(), l.data(), acc.data(), scratch.data());
    ss::attn_online_finish(g, hd, l.data(), acc.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["key-heads/s"] =
      benchmark::Counter(static_cast<double>(keys) * g * st.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionFused)->Args({8, 512, 2})->Args({64, 512, 8})->Args({128, 4096, 4});

// The engine's decode attention over a typed cache: blocks of 16 keys as the
// pool lays them out (float types: K [kv_dim][16] then V [16][kv_dim], or
// V [kv_dim][16] too with vdm = 1, as pools of heads of 8 or less keep it;
// Q8_0 / Q4_0: K and V both [16] rows of ggml blocks), 4 KV heads of a layer
// one after the other, one call each over the runs of all blocks. Range:
// cache type (ggml's number), head size, keys, query heads per KV head,
// V dimension-major. Time per layer and token.
void BM_AttentionRuns(benchmark::State& st) {
  const auto type = static_cast<ss::GgmlType>(st.range(0));
  const int hd = static_cast<int>(st.range(1)), keys = static_cast<int>(st.range(2)), g = static_cast<int>(st.range(3));
  const bool v_dim_major = st.range(4) != 0;
  constexpr int kKvHeads = 4, kBlock = 16;
  const int kv_dim = kKvHeads * hd, blocks = (keys + kBlock - 1) / kBlock;
  const size_t rb = ss::row_bytes(type, kv_dim), half = rb * kBlock;  // bytes of K (or V) per block
  const auto src = random_floats(static_cast<size_t>(kv_dim), 3);
  std::vector<uint8_t> pool(half * 2 * static_cast<size_t>(blocks));
  for (size_t r = 0; r < pool.size() / rb; ++r) ss::quantize_row(type, src.data(), pool.data() + r * rb, kv_dim);
  const auto q = random_floats(static_cast<size_t>(kKvHeads * g * hd), 5);
  std::vector<float> m(g), l(g), acc(static_cast<size_t>(g * hd)), out(acc.size() * kKvHeads),
      scratch(static_cast<size_t>(ss::attn_scratch_floats(g, hd)));
  std::vector<ss::KvRun> runs(static_cast<size_t>(blocks));
  for (auto _ : st) {
    for (int h = 0; h < kKvHeads; ++h) {
      for (int b = 0; b < blocks; ++b) {
        const uint8_t* base = pool.data() + static_cast<size_t>(b) * 2 * half;
        runs[b] = ss::KvRun{ss::KvHeadView{type, base, base + half, kBlock, rb, h * hd, v_dim_major},
                            q.data() + static_cast<size_t>(h * g * hd), 0, std::min(kBlock, keys - b * kBlock), 0.0f};
      }
      ss::attn_online_init(g, hd, m.data(), l.data(), acc.data());
      ss::attn_online_update_runs(g, runs.data(), blocks, hd, 0.125f, m.data(), l.data(), acc.data(), scratch.data());
      ss::attn_online_finish(g, hd, l.data(), acc.data(), out.data() + static_cast<size_t>(h * g * hd));
    }
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["key-heads/s"] =
      benchmark::Counter(static_cast<double>(keys) * g * kKvHeads * st.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionRuns)
    ->ArgNames({"type", "hd", "keys", "g", "vdm"})
    ->Args({1, 8, 512, 2, 0})
    ->Args({1, 8, 512, 2, 1})
    ->Args({1, 8, 256, 2, 0})
    ->Args({1, 8, 256, 2, 1})
    ->Args({1, 8, 2048, 2, 0})
    ->Args({1, 8, 2048, 2, 1})
    ->Args({1, 8, 16384, 2, 0})
    ->Args({1, 8, 16384, 2, 1})
    ->Args({1, 64, 512, 8, 0})
    ->Args({1, 64, 2048, 8, 0})
    ->Args({8, 64, 2048, 8, 0})
    ->Args({2, 64, 2048, 8, 0})
    ->Args({1, 128, 2048, 2, 0})
    ->Args({8, 128, 2048, 2, 0})
    ->Args({1, 256, 2048, 4, 0})
    ->Args({8, 256, 2048, 4, 0});

// The per-step cost of handing work to the pool's threads: one fork-join of
// trivial parts (a decode step issues a few per layer), in microseconds
// round trip. Range: threads.
void BM_ThreadPoolForkJoin(benchmark::State& st) {
  ss::ThreadPool pool(static_cast<int>(st.range(0)));
  std::atomic<int> sink{0};
  for (auto _ : st)
    pool.parallel_for(static_cast<size_t>(pool.size()),
                      [&](size_t b, size_t e) { sink.fetch_add(static_cast<int>(e - b), std::memory_order_relaxed); });
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_ThreadPoolForkJoin)->Arg(1)->Arg(2);

void BM_RmsNorm(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const auto x = random_floats(static_cast<size_t>(n));
  const auto w = random_floats(static_cast<size_t>(n), 4);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : st) {
    ss::rms_norm(x.data(), w.data(), n, 1e-5f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["GB/s"] = benchmark::Counter(8.0 * n * st.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RmsNorm)->Arg(64)->Arg(4096);

void BM_Rope(benchmark::State& st) {
  const int heads = 32, hd = 128;
  ss::RopeTable rt(hd, 10000.0f);
  std::vector<float> c(hd / 2), s(hd / 2);
  auto x = random_floats(static_cast<size_t>(heads * hd));
  int64_t pos = 0;
  for (auto _ : st) {
    rt.angles(pos++, c.data(), s.data());
    ss::rope_apply(x.data(), heads, hd, hd / 2, c.data(), s.data(), ss::RopeStyle::Neox);
    benchmark::DoNotOptimize(x.data());
  }
}
BENCHMARK(BM_Rope);

// STREAM triad a = b + s*c over arrays far larger than the caches.
void BM_StreamTriad(benchmark::State& st) {
  const size_t n = static_cast<size_t>(st.range(0));
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  for (auto _ : st) {
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    benchmark::DoNotOptimize(a.data());
    benchmark::ClobberMemory();
  }
  st.counters["GB/s"] =
      benchmark::Counter(12.0 * static_cast<double>(n) * st.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_StreamTriad)->Arg(1 << 25);

}  // namespace

BENCHMARK_MAIN();
