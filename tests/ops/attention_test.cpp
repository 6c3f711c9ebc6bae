// Attention kernels against their scalar twins at odd sizes and strides, in
// every clone (AVX-512, AVX2, baseline) the CPU and the cap allow.
#include "ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu_levels.h"

namespace ss {
namespace {

void check_SoftmaxExpIsAccurateOverItsRange() {
  // Scores far apart: the fast exp must match libm to ~2e-7 relative.
  for (float spread : {0.1f, 5.0f, 30.0f, 100.0f}) {
    std::vector<float> x(37), y;
    for (size_t i = 0; i < x.size(); ++i) x[i] = -spread * static_cast<float>(i) / 36.0f;
    y = x;
    softmax(x.data(), 37);
    softmax_scalar(y.data(), 37);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 4e-7f * y[i] + 1e-30f) << spread << " " << i;
  }
}

TEST(AttentionKernels, SoftmaxExpIsAccurateOverItsRange) {
  test::at_every_clone_level(check_SoftmaxExpIsAccurateOverItsRange);
}

void check_MatchScalarTwinsAtOddSizes() {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int hd : {1, 3, 8, 13, 64, 67}) {
    for (int count : {1, 5, 16, 33}) {
      const int stride = hd * 3 + 1;
      const int col_stride = count + 3;  // K is dimension-major: key r, dim d at [d*col_stride + r]
      std::vector<float> q(hd), rows(static_cast<size_t>(stride) * count), cols(static_cast<size_t>(col_stride) * hd);
      for (auto& v : q) v = u(rng);
      for (auto& v : rows) v = u(rng);
      for (auto& v : cols) v = u(rng);
      std::vector<float> a(count), b(count);
      attn_scores(q.data(), cols.data(), col_stride, count, hd, 0.37f, a.data());
      attn_scores_scalar(q.data(), cols.data(), col_stride, count, hd, 0.37f, b.data());
      for (int i = 0; i < count; ++i) EXPECT_NEAR(a[i], b[i], 1e-5f) << hd << " " << count;
      std::vector<float> sm = a;
      softmax(a.data(), count);
      softmax_scalar(sm.data(), count);
      double sum = 0;
      for (int i = 0; i < count; ++i) {
        sum += a[i];
        EXPECT_NEAR(a[i], sm[i], 1e-6f * std::max(1.0f, sm[i] * 4)) << count;
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
      std::vector<float> acc1(hd, 0.5f), acc2(hd, 0.5f);
      attn_accumulate(a.data(), rows.data(), stride, count, hd, acc1.data());
      attn_accumulate_scalar(a.data(), rows.data(), stride, count, hd, acc2.data());
      for (int d = 0; d < hd; ++d) EXPECT_NEAR(acc1[d], acc2[d], 1e-5f);
    }
  }
}

TEST(AttentionKernels, MatchScalarTwinsAtOddSizes) { test::at_every_clone_level(check_MatchScalarTwinsAtOddSizes); }

}  // namespace
}  // namespace ss

namespace ss {
namespace {

// The fused online-softmax kernel, fed runs of uneven length, against the
// scalar twins (scores, exact softmax, accumulate) over the concatenation.
// Two K layouts: columns just past the keys (chunks that would run past
// them are copied out) and whole 16-column chunks whose unused columns hold
// NaN (read, and must be masked).
void check_OnlineSoftmaxOverRunsMatchesTwoPassTwin() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-3, 3);
  for (int hd : {8, 13, 16, 48, 64, 72, 128, 256}) {
    for (int g : {1, 2, 3, 4}) {
      for (int n : {1, 5, 16, 37, 100}) {
        for (const int col_stride : {n + 5, (n + 15) / 16 * 16 + 16}) {  // K dimension-major, as in a block
          const int stride = hd * 3 + 1;                                 // V rows of a block interleave other KV heads
          std::vector<float> q(static_cast<size_t>(g) * hd), k(static_cast<size_t>(col_stride) * hd),
              v(static_cast<size_t>(n) * stride);
          for (auto& x : q) x = u(rng);
          for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<int>(i % col_stride) < n ? u(rng) : NAN;
          for (auto& x : v) x = u(rng);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          std::vector<float> m(g), l(g), acc(static_cast<size_t>(g) * hd), out(acc.size()),
              scratch(static_cast<size_t>(attn_scratch_floats(g, hd)));
          attn_online_init(g, hd, m.data(), l.data(), acc.data());
          for (int r0 = 0; r0 < n;) {
            const int count = std::min(n - r0, 1 + (r0 * 7) % 37);  // run lengths 1..37
            attn_online_update(q.data(), g, k.data(), col_stride, v.data(), stride, r0, count, hd, scale, m.data(),
                               l.data(), acc.data(), scratch.data());
            r0 += count;
          }
          attn_online_finish(g, hd, l.data(), acc.data(), out.data());
          for (int h = 0; h < g; ++h) {
            std::vector<float> p(static_cast<size_t>(n)), want(static_cast<size_t>(hd), 0.0f);
            attn_scores_scalar(q.data() + h * hd, k.data(), col_stride, n, hd, scale, p.data());
            softmax_scalar(p.data(), n);
            attn_accumulate_scalar(p.data(), v.data(), stride, n, hd, want.data());
            for (int d = 0; d < hd; ++d)
              ASSERT_NEAR(out[static_cast<size_t>(h) * hd + d], want[d], 2e-5f)
                  << "hd=" << hd << " g=" << g << " n=" << n << " cols=" << col_stride << " h=" << h << " d=" << d;
          }
        }
      }
    }
  }
}

TEST(AttentionKernels, OnlineSoftmaxOverRunsMatchesTwoPassTwin) {
  test::at_every_clone_level(check_OnlineSoftmaxOverRunsMatchesTwoPassTwin);
}

}  // namespace
}  // namespace ss

namespace ss {
namespace {

// The same kernel with soft-capping, ALiBi biases and sink logits, against
// the two-pass twin: cap * tanh(score / cap) + slope * (key - query
// position), softmax with the sinks in the denominator (softmax_with_extra),
// accumulate.
void check_OnlineSoftmaxWithAlibiAndSinksMatchesTwin() {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-3, 3);
  for (int hd : {8, 13, 64}) {
    for (int g : {1, 3, 4}) {
      for (int n : {1, 17, 53}) {
        const int col_stride = (n + 15) / 16 * 16 + 16, stride = hd * 2 + 3;
        std::vector<float> q(static_cast<size_t>(g) * hd), k(static_cast<size_t>(col_stride) * hd),
            v(static_cast<size_t>(n) * stride), slopes(static_cast<size_t>(g)), sinks(2 * static_cast<size_t>(g));
        for (auto& x : q) x = u(rng);
        for (auto& x : k) x = u(rng);
        for (auto& x : v) x = u(rng);
        alibi_slopes(g, 8.0f, slopes.data());
        for (auto& x : sinks) x = u(rng);
        const float scale = 0.3f;
        const int64_t query = n + 40;  // keys sit at positions 3 .. 3 + n - 1
        for (int n_sinks : {0, 1, 2})
          for (float cap : {0.0f, 2.5f}) {
            std::vector<float> m(g), l(g), acc(static_cast<size_t>(g) * hd), out(acc.size()),
                scratch(static_cast<size_t>(attn_scratch_floats(g, hd)));
            attn_online_init_sinks(g, hd, sinks.data(), n_sinks, m.data(), l.data(), acc.data());
            for (int r0 = 0; r0 < n;) {
              const int count = std::min(n - r0, 1 + (r0 * 5) % 19);
              const AttnScoring sc{cap, slopes.data(), static_cast<float>(3 - query)};
              attn_online_update(q.data(), g, k.data(), col_stride, v.data(), stride, r0, count, hd, scale, m.data(),
                                 l.data(), acc.data(), scratch.data(), &sc);
              r0 += count;
            }
            attn_online_finish(g, hd, l.data(), acc.data(), out.data());
            for (int h = 0; h < g; ++h) {
              std::vector<float> p(static_cast<size_t>(n)), want(static_cast<size_t>(hd), 0.0f), extra;
              attn_scores_scalar(q.data() + h * hd, k.data(), col_stride, n, hd, scale, p.data());
              for (int r = 0; r < n; ++r) {
                float& s = p[static_cast<size_t>(r)];
                if (cap > 0) s = cap * std::tanh(s / cap);
                s += slopes[static_cast<size_t>(h)] * (3 + r - query);
              }
              for (int s = 0; s < n_sinks; ++s) extra.push_back(sinks[static_cast<size_t>(s * g + h)]);
              softmax_with_extra(p.data(), n, extra.data(), n_sinks);
              attn_accumulate_scalar(p.data(), v.data(), stride, n, hd, want.data());
              for (int d = 0; d < hd; ++d)
                ASSERT_NEAR(out[static_cast<size_t>(h) * hd + d], want[d], 2e-5f)
                    << "hd=" << hd << " g=" << g << " n=" << n << " sinks=" << n_sinks << " cap=" << cap << " h=" << h;
            }
          }
      }
    }
  }
}

TEST(AttentionKernels, OnlineSoftmaxWithAlibiAndSinksMatchesTwin) {
  test::at_every_clone_level(check_OnlineSoftmaxWithAlibiAndSinksMatchesTwin);
}

// ggml's slopes: 8 heads 2^-1 .. 2^-8; 6 heads (not a power of two) take
// the second branch for the last two (MPT's build_alibi_bias agrees).
TEST(Alibi, SlopesFollowGgmlRule) {
  float s8[8], s6[6];
  alibi_slopes(8, 8.0f, s8);
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(s8[h], std::ldexp(1.0f, -(h + 1)));
  alibi_slopes(6, 8.0f, s6);
  const float want[6] = {1.0f / 4, 1.0f / 16, 1.0f / 64, 1.0f / 256, 1.0f / 2, 1.0f / 8};
  for (int h = 0; h < 6; ++h) EXPECT_FLOAT_EQ(s6[h], want[h]);
}

// A sink logit of 0 is softmax1: probabilities sum to 1 / (1 + 1/sum exp).
TEST(Softmax, ExtraLogitsTakeProbabilityMass) {
  float x[3] = {0.0f, 0.0f, 0.0f};
  const float zero = 0.0f;
  softmax_with_extra(x, 3, &zero, 1);
  for (float p : x) EXPECT_FLOAT_EQ(p, 0.25f);
  float y[2] = {1.0f, 2.0f};
  softmax_with_extra(y, 2, nullptr, 0);
  EXPECT_NEAR(y[0] + y[1], 1.0f, 1e-7f);
}

}  // namespace
}  // namespace ss
