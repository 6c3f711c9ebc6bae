// llama.cpp's per-tensor type rules, without a model.
#include "model/quant_plan.h"

#include <gtest/gtest.h>

namespace ss {
namespace {

GgmlType pick(const std::string& target, const std::string& name, std::vector<int64_t> ne,
              QuantModelInfo m = {32, 0, true}, bool pure = false) {
  auto t = parse_quant_target(target);
  EXPECT_TRUE(t.ok());
  QuantTarget q = t.value();
  q.pure = pure;
  return choose_quant_type(q, m, name, ne, GgmlType::F32).type;
}

TEST(QuantPlan, NamesAndAliasesAsLlamaCpp) {
  EXPECT_EQ(parse_quant_target("Q4_K").value().name, "q4_k_m");
  EXPECT_EQ(parse_quant_target("q5_k").value().file_type, 17u);
  EXPECT_EQ(parse_quant_target("q4_0").value().file_type, 2u);
  EXPECT_FALSE(parse_quant_target("q3_k").ok());
  EXPECT_FALSE(parse_quant_target("").ok());
}

TEST(QuantPlan, NormsBiasesRoutersAndSinksKeepTheirType) {
  EXPECT_EQ(pick("q4_0", "blk.0.attn_norm.weight", {4096}), GgmlType::F32);
  EXPECT_EQ(pick("q4_0", "blk.0.attn_norm.weight", {4096, 1}), GgmlType::F32);  // ggml_n_dims ignores trailing 1s
  EXPECT_EQ(pick("q4_0", "blk.0.attn_q.bias", {4096, 4096}), GgmlType::F32);
  EXPECT_EQ(pick("q4_0", "blk.0.ffn_gate_inp.weight", {4096, 8}), GgmlType::F32);
  EXPECT_EQ(pick("q4_0", "blk.0.attn_q.weight", {4096, 4096}), GgmlType::Q4_0);
}

TEST(QuantPlan, OutputTakesQ6KUnlessQ8_0OrPure) {
  EXPECT_EQ(pick("q4_0", "output.weight", {4096, 32000}), GgmlType::Q6_K);
  EXPECT_EQ(pick("q8_0", "output.weight", {4096, 32000}), GgmlType::Q8_0);
  EXPECT_EQ(pick("q4_k_m", "output.weight", {4096, 32000}, {32, 0, true}, true), GgmlType::Q4_K);
  // Tied: the token embedding is the output.
  EXPECT_EQ(pick("q4_0", "token_embd.weight", {4096, 32000}, {32, 0, false}), GgmlType::Q6_K);
  EXPECT_EQ(pick("q4_0", "token_embd.weight", {4096, 32000}, {32, 0, true}), GgmlType::Q4_0);
  EXPECT_EQ(pick("q4_0", "output.weight", {4000, 32000}), GgmlType::Q8_0);  // rows K-quants cannot hold
}

TEST(QuantPlan, KMixesFollowUseMoreBits) {
  // 32 layers: first eighth 0-3, last eighth 28-31, and (l - 4) % 3 == 2.
  for (int l = 0; l < 32; ++l) {
    const bool more = l < 4 || l >= 28 || (l - 4) % 3 == 2;
    const std::string p = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(pick("q4_k_m", p + "attn_v.weight", {4096, 4096}), more ? GgmlType::Q6_K : GgmlType::Q4_K) << l;
    EXPECT_EQ(pick("q5_k_m", p + "ffn_down.weight", {11008, 4096}), more ? GgmlType::Q6_K : GgmlType::Q5_K) << l;
    EXPECT_EQ(pick("q4_k_s", p + "attn_v.weight", {4096, 4096}), l < 4 ? GgmlType::Q5_K : GgmlType::Q4_K) << l;
    EXPECT_EQ(pick("q4_k_s", p + "ffn_down.weight", {11008, 4096}), l < 4 ? GgmlType::Q5_K : GgmlType::Q4_K) << l;
    EXPECT_EQ(pick("q5_k_s", p + "attn_v.weight", {4096, 4096}), GgmlType::Q5_K) << l;
    EXPECT_EQ(pick("q4_k_m", p + "attn_v.weight", {4096, 4096}, {32, 0, true}, true), GgmlType::Q4_K) << l;
  }
  EXPECT_EQ(pick("q4_k_m", "blk.0.attn_qkv.weight", {4096, 12288}), GgmlType::Q5_K);
  EXPECT_EQ(pick("q5_k_m", "blk.0.attn_qkv.weight", {4096, 12288}), GgmlType::Q6_K);
  EXPECT_EQ(pick("q4_k_m", "blk.9.attn_v.weight", {4096, 1024}, {32, 8, true}), GgmlType::Q8_0);  // Mixtral
  // Eight experts also lift attn_k to Q8_0, at every mixed type (not --pure,
  // not with 32 experts as gpt-oss-20b has).
  for (const char* t : {"q4_k_m", "q5_k_s", "q4_0", "q6_k"})
    EXPECT_EQ(pick(t, "blk.9.attn_k.weight", {4096, 1024}, {32, 8, true}), GgmlType::Q8_0) << t;
  EXPECT_EQ(pick("q4_k_m", "blk.9.attn_k.weight", {4096, 1024}, {32, 8, true}, true), GgmlType::Q4_K);
  EXPECT_EQ(pick("q4_k_m", "blk.9.attn_k.weight", {4096, 1024}, {32, 32, true}), GgmlType::Q4_K);
}

TEST(QuantPlan, RowsThatDoNotFitFallBackAsLlamaCpp) {
  EXPECT_EQ(pick("q4_k_m", "blk.9.attn_q.weight", {288, 288}), GgmlType::Q5_0);
  EXPECT_EQ(pick("q5_k_m", "blk.9.attn_q.weight", {288, 288}), GgmlType::Q5_1);
  EXPECT_EQ(pick("q6_k", "blk.9.attn_q.weight", {288, 288}), GgmlType::Q8_0);
  EXPECT_EQ(pick("q4_k_m", "blk.9.ffn_down.weight", {172, 64}), GgmlType::F16);
  EXPECT_EQ(pick("q4_0", "blk.9.ffn_down.weight", {172, 64}), GgmlType::F16);
  EXPECT_EQ(pick("q4_0", "blk.9.attn_q.weight", {288, 288}), GgmlType::Q4_0);
}

}  // namespace
}  // namespace ss
