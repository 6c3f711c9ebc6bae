#include "model/quant_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

namespace ss {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int block_of(GgmlType t) { return type_traits(static_cast<uint32_t>(t))->block_elems; }

// The layer index of "blk.N.…", -1 for tensors outside the layers.
int layer_of(const std::string& name) {
  int l = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &l) != 1) return -1;
  return l;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and
// every third layer between.
bool more_bits(int l, int n) { return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2; }

}  // namespace

std::string quant_target_names() {
  return "f32 f16 bf16 q8_0 q4_0 q5_0 q5_1 q6_k q4_k_s q4_k_m q5_k_s q5_k_m (q4_k = q4_k_m, q5_k = q5_k_m)";
}

Result<QuantTarget> parse_quant_target(const std::string& raw) {
  std::string n = raw;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  struct Row {
    GgmlType base;
    QuantMix mix;
    uint32_t ftype;
  };
  static const std::map<std::string, Row> rows = {
      {"f32", {GgmlType::F32, QuantMix::None, 0}},    {"f16", {GgmlType::F16, QuantMix::None, 1}},
      {"bf16", {GgmlType::BF16, QuantMix::None, 32}}, {"q4_0", {GgmlType::Q4_0, QuantMix::None, 2}},
      {"q8_0", {GgmlType::Q8_0, QuantMix::None, 7}},  {"q5_0", {GgmlType::Q5_0, QuantMix::None, 8}},
      {"q5_1", {GgmlType::Q5_1, QuantMix::None, 9}},  {"q4_k_s", {GgmlType::Q4_K, QuantMix::KS, 14}},
      {"q4_k_m", {GgmlType::Q4_K, QuantMix::KM, 15}}, {"q4_k", {GgmlType::Q4_K, QuantMix::KM, 15}},
      {"q5_k_s", {GgmlType::Q5_K, QuantMix::KS, 16}}, {"q5_k_m", {GgmlType::Q5_K, QuantMix::KM, 17}},
      {"q5_k", {GgmlType::Q5_K, QuantMix::KM, 17}},   {"q6_k", {GgmlType::Q6_K, QuantMix::None, 18}},
  };
  auto it = rows.find(n);
  if (it == rows.end()) return make_error("unknown type '" + raw + "' (one of: " + quant_target_names() + ")");
  QuantTarget t;
  t.name = n == "q4_k" ? "q4_k_m" : n == "q5_k" ? "q5_k_m" : n;
  t.base = it->second.base;
  t.mix = it->second.mix;
  t.file_type = it->second.ftype;
  return t;
}

QuantChoice choose_quant_type(const QuantTarget& t, const QuantModelInfo& m, const std::string& name,
                              const std::vector<int64_t>& ne, GgmlType from) {
  // Norms, biases, routers (ffn_gate_inp: tiny and precision-critical) and
  // learned sinks keep their type, as in llama.cpp.
  size_t dims = ne.size();
  while (dims > 1 && ne[dims - 1] == 1) --dims;  // ggml_n_dims: trailing ones do not count
  if (!ends_with(name, ".weight") || dims < 2 || name.find("ffn_gate_inp") != std::string::npos ||
      name.find("attn_sinks") != std::string::npos)
    return {from, ""};
  GgmlType type = t.base;
  std::string note;
  if (is_quantized(t.base) && !t.pure) {
    const int l = layer_of(name), n = m.n_layers;
    const bool km = t.mix == QuantMix::KM, ks = t.mix == QuantMix::KS;
    const bool is_output = name == "output.weight" || (!m.has_output && name == "token_embd.weight");
    if (is_output) {
      if (ne[0] % kQkK != 0)
        type = GgmlType::Q8_0;
      else if (t.base != GgmlType::Q8_0)
        type = GgmlType::Q6_K;
    } else if (name.find("attn_v.weight") != std::string::npos) {
      if (km && more_bits(l, n)) type = GgmlType::Q6_K;
      if (ks && t.base == GgmlType::Q4_K && l < 4) type = GgmlType::Q5_K;
      if (m.n_experts == 8) type = GgmlType::Q8_0;  // Mixtral: 8 experts share attn_v
    } else if (name.find("attn_k.weight") != std::string::npos) {
      if (m.n_experts == 8) type = GgmlType::Q8_0;  // and attn_k, at every quantized type (llama.cpp b8183)
    } else if (name.find("ffn_down") != std::string::npos) {
      if (km && more_bits(l, n)) type = GgmlType::Q6_K;
      if (ks && t.base == GgmlType::Q4_K && l < n / 8) type = GgmlType::Q5_K;
    } else if (name.find("attn_output.weight") != std::string::npos) {
      if (m.n_experts == 8 && t.mix != QuantMix::None && t.base == GgmlType::Q4_K) type = GgmlType::Q5_K;
    } else if (name.find("attn_qkv.weight") != std::string::npos) {
      if (km) type = t.base == GgmlType::Q4_K ? GgmlType::Q5_K : GgmlType::Q6_K;
    }
    if (type != t.base) note = "llama.cpp's " + t.name + " rule";
  }
  if (ne[0] % block_of(type) != 0) {
    const GgmlType wanted = type;
    type = wanted == GgmlType::Q4_K   ? GgmlType::Q5_0
           : wanted == GgmlType::Q5_K ? GgmlType::Q5_1
           : wanted == GgmlType::Q6_K ? GgmlType::Q8_0
                                      : GgmlType::F16;
    if (ne[0] % block_of(type) != 0) type = GgmlType::F16;
    note = "rows of " + std::to_string(ne[0]) + " do not fit " + type_name(static_cast<uint32_t>(wanted)) +
           " blocks of " + std::to_string(block_of(wanted));
  }
  return {type, note};
}

}  // namespace ss
