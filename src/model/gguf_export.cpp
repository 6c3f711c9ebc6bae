#include "model/gguf_export.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "model/hf_config.h"
#include "model/model.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace ss {

namespace {

using json = nlohmann::json;

// GGUF's token types (llama.cpp's LLAMA_TOKEN_TYPE_*) for a vocabulary read
// from tokenizer.json: byte-fallback pieces "<0xHH>" are BYTE.
std::vector<int32_t> gguf_token_types(const Vocab& v) {
  std::vector<int32_t> t(v.pieces.size());
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string& p = v.pieces[i];
    const bool byte = p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>';
    t[i] = byte && v.kind != VocabKind::ByteLevel ? 6 : static_cast<int32_t>(v.types[i]);
  }
  return t;
}

// SentencePiece-style scores for a rank-ordered BPE: a piece made by merge r
// scores -r, so "merge the best-scoring pair" (llama.cpp's SPM tokenizer)
// takes the merges in rank order. Pieces no merge makes score below all.
std::vector<float> scores_from_merges(const Vocab& v) {
  std::vector<float> s(v.pieces.size(), 0.0f);
  std::vector<bool> set(v.pieces.size(), false);
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const int32_t id = v.find(v.merges[r].first + v.merges[r].second);
    if (id < 0 || set[static_cast<size_t>(id)]) continue;
    s[static_cast<size_t>(id)] = -static_cast<float>(r);
    set[static_cast<size_t>(id)] = true;
  }
  for (size_t i = 0; i < s.size(); ++i) {
    const std::string& p = v.pieces[i];
    size_t chars = 0;
    for (unsigned char c : p) chars += (c & 0xC0) != 0x80;
    if (!set[i] && chars > 1 && v.types[i] == TokenType::Normal) s[i] = -1e9f;
  }
  return s;
}

void write_vocab(GgufWriter& w, const Vocab& v) {
  if (v.kind == VocabKind::ByteLevel) {
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", pre_tokenizer_name(v.pre));
    std::vector<std::string> merges;
    merges.reserve(v.merges.size());
    for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
    w.set_strings("tokenizer.ggml.tokens", v.pieces);
    w.set_i32s("tokenizer.ggml.token_type", gguf_token_types(v));
    w.set_strings("tokenizer.ggml.merges", merges);
  } else {
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_strings("tokenizer.ggml.tokens", v.pieces);
    w.set_f32s("tokenizer.ggml.scores", v.kind == VocabKind::RankBpe ? scores_from_merges(v) : v.scores);
    w.set_i32s("tokenizer.ggml.token_type", gguf_token_types(v));
    w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  }
  if (v.bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  if (v.eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  if (v.unk >= 0) w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
  if (v.eot >= 0) w.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(v.eot));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  if (!v.chat_template.empty()) w.set_string("tokenizer.chat_template", v.chat_template);
}

ExportTensor from_view(const std::string& name, const TensorView& v, int permute_heads = 0) {
  ExportTensor t;
  t.name = name;
  t.ne = v.ne1 > 1 ? std::vector<int64_t>{v.ne0, v.ne1} : std::vector<int64_t>{v.ne0};
  t.type = v.type;
  t.data = static_cast<const uint8_t*>(v.data);
  t.permute_heads = permute_heads;
  return t;
}

}  // namespace

Result<ExportSource> export_source_gguf(const std::string& path) {
  SS_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(path));
  auto file = std::make_shared<GgufFile>(std::move(g));
  ExportSource src;
  src.keep_alive.push_back(file);
  for (const auto& [key, value] : file->metadata()) {
    if (key == "general.alignment" || key == "general.file_type" || key == "general.quantization_version") continue;
    src.meta.set_value(key, value);
  }
  SS_ASSIGN_OR_RETURN(const std::string arch, file->get_string("general.architecture"));
  src.description = "GGUF " + arch;
  src.info.n_layers = static_cast<int>(file->opt_int(arch + ".block_count").value_or(0));
  src.info.n_experts = static_cast<int>(file->opt_int(arch + ".expert_count").value_or(0));
  src.info.has_output = file->has_tensor("output.weight");
  for (const auto& ti : file->tensors()) {
    if (!type_traits(ti.raw_type))
      return make_error(path + ": tensor '" + ti.name + "' has unsupported type " + type_name(ti.raw_type));
    // Views from the reader, which checked offsets and sizes against the file.
    const void* data = nullptr;
    if (ti.ne.size() >= 3) {
      SS_ASSIGN_OR_RETURN(auto slices, file->tensor_slices(ti.name));
      if (slices.empty()) return make_error(path + ": tensor '" + ti.name + "' is empty");
      data = slices[0].data;
    } else {
      SS_ASSIGN_OR_RETURN(TensorView v, file->tensor(ti.name));
      data = v.data;
    }
    ExportTensor t;
    t.name = ti.name;
    t.ne = ti.ne;
    t.type = static_cast<GgmlType>(ti.raw_type);
    t.data = static_cast<const uint8_t*>(data);
    src.tensors.push_back(std::move(t));
  }
  return src;
}

Result<ExportSource> export_source_hf(const std::string& dir, const std::string& chat_template) {
  SS_ASSIGN_OR_RETURN(std::shared_ptr<Model> m, load_hf_model(dir));
  const ModelConfig& c = m->config;
  ExportSource src;
  src.keep_alive.push_back(m);
  // Mistral is a Llama to llama.cpp; Qwen2 keeps its name (neox rope, biases).
  const std::string arch = c.arch_name == "qwen2" ? "qwen2" : "llama";
  const bool permute = arch == "llama";
  src.description = "HF " + c.arch_name;
  GgufWriter& w = src.meta;
  w.set_string("general.architecture", arch);
  w.set_string("general.name", std::filesystem::path(dir).filename().string());
  auto u32 = [&](const std::string& k, int64_t v) { w.set_u32(arch + "." + k, static_cast<uint32_t>(v)); };
  u32("context_length", c.trained_context);
  u32("embedding_length", c.dim);
  u32("block_count", c.n_layers);
  u32("feed_forward_length", c.hidden_dim);
  u32("attention.head_count", c.n_heads);
  u32("attention.head_count_kv", c.n_kv_heads);
  u32("rope.dimension_count", c.head_dim);
  u32("vocab_size", c.n_vocab);
  if (c.head_dim * c.n_heads != c.dim) {
    u32("attention.key_length", c.head_dim);
    u32("attention.value_length", c.head_dim);
  }
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", c.norm_eps);
  w.set_f32(arch + ".rope.freq_base", static_cast<float>(c.rotaries.at(0).base));
  Vocab v = m->vocab;
  v.chat_template = chat_template.empty() ? hf_chat_template(dir) : chat_template;
  write_vocab(w, v);
  src.info.n_layers = c.n_layers;
  src.info.has_output = !c.tied_output;

  auto& ts = src.tensors;
  ts.push_back(from_view("token_embd.weight", m->tok_embd));
  ts.push_back(from_view("output_norm.weight", m->output_norm));
  if (!c.tied_output) ts.push_back(from_view("output.weight", m->output));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = m->layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    ts.push_back(from_view(p + "attn_norm.weight", L.attn_norm));
    ts.push_back(from_view(p + "attn_q.weight", L.wq, permute ? c.n_heads : 0));
    ts.push_back(from_view(p + "attn_k.weight", L.wk, permute ? c.n_kv_heads : 0));
    ts.push_back(from_view(p + "attn_v.weight", L.wv));
    ts.push_back(from_view(p + "attn_output.weight", L.wo));
    if (!L.bq.empty()) {
      ts.push_back(from_view(p + "attn_q.bias", L.bq, permute ? c.n_heads : 0));
      ts.push_back(from_view(p + "attn_k.bias", L.bk, permute ? c.n_kv_heads : 0));
      ts.push_back(from_view(p + "attn_v.bias", L.bv));
    }
    ts.push_back(from_view(p + "ffn_norm.weight", L.ffn_norm));
    ts.push_back(from_view(p + "ffn_gate.weight", L.w_gate));
    ts.push_back(from_view(p + "ffn_up.weight", L.w_up));
    ts.push_back(from_view(p + "ffn_down.weight", L.w_down));
  }
  return src;
}

Result<ExportSource> open_export_source(const std::string& path, const std::string& chat_template) {
  if (std::filesystem::is_directory(path)) return export_source_hf(path, chat_template);
  SS_ASSIGN_OR_RETURN(ExportSource s, export_source_gguf(path));
  if (!chat_template.empty()) s.meta.set_string("tokenizer.chat_template", chat_template);
  return s;
}

Result<ExportSummary> write_gguf_export(const ExportSource& src, const ExportOptions& opt, const std::string& out) {
  GgufWriter w = src.meta;
  w.set_u32("general.file_type", opt.target.file_type);
  if (is_quantized(opt.target.base)) w.set_u32("general.quantization_version", 2);
  ExportSummary sum;
  std::map<std::string, int> counts;
  int64_t total = 0;
  for (const auto& t : src.tensors) {
    int64_t n = 1;
    for (auto d : t.ne) n *= d;
    total += n;
  }
  auto pool = std::make_shared<ThreadPool>(std::max(1, opt.threads));
  auto done = std::make_shared<int64_t>(0);
  for (const auto& t : src.tensors) {
    const QuantChoice choice = choose_quant_type(opt.target, src.info, t.name, t.ne, t.type);
    const GgmlType to = choice.type;
    if (is_quantized(t.type) && to != t.type && !opt.allow_requantize)
      return make_error("tensor '" + t.name + "' is already " + type_name(static_cast<uint32_t>(t.type)) +
                        ": quantize from F32/F16/BF16, or pass --allow-requantize (precision is lost twice)");
    if (!choice.note.empty() && opt.log)
      opt.log(t.name + " -> " + type_name(static_cast<uint32_t>(to)) + " (" + choice.note + ")");
    const int64_t cols = t.ne[0];
    int64_t rows = 1;
    for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
    const size_t in_rb = row_bytes(t.type, cols), out_rb = row_bytes(to, cols);
    sum.tensors += 1;
    sum.weights += cols * rows;
    sum.bytes_in += in_rb * static_cast<size_t>(rows);
    sum.bytes_out += out_rb * static_cast<size_t>(rows);
    counts[type_name(static_cast<uint32_t>(to))] += 1;
    const ExportTensor* tp = &t;
    w.add_tensor_fill(t.name, to, t.ne, [=, &opt](uint8_t* dst) {
      // Permuted q/k: row (head h, pair i, half j) of the output is row
      // (h, j, i) of the rotate-half source.
      const int heads = tp->permute_heads;
      if (heads > 0 && rows == 1) {  // a bias: its elements, not rows, are per head
        std::vector<float> f(static_cast<size_t>(cols)), g(f.size());
        dequantize_row(tp->type, tp->data, f.data(), cols);
        const int64_t hd = cols / heads;
        for (int64_t k = 0; k < cols; ++k)
          g[static_cast<size_t>(k)] = f[static_cast<size_t>((k / hd) * hd + (k % hd % 2) * (hd / 2) + (k % hd) / 2)];
        quantize_row(to, g.data(), dst, cols);
        *done += cols;
        return;
      }
      const int64_t hd = heads > 0 ? rows / heads : 0;
      auto source_row = [&](int64_t r) {
        if (heads <= 0) return r;
        const int64_t h = r / hd, k = r % hd, i = k / 2, j = k % 2;
        return h * hd + j * (hd / 2) + i;
      };
      // Slices of rows small enough for a steady progress bar.
      const int64_t slice = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, cols));
      for (int64_t r0 = 0; r0 < rows; r0 += slice) {
        const int64_t r1 = std::min(rows, r0 + slice);
        pool->parallel_for(static_cast<size_t>(r1 - r0), [&](size_t b, size_t e) {
          std::vector<float> f(static_cast<size_t>(cols));
          for (size_t k = b; k < e; ++k) {
            const int64_t r = r0 + static_cast<int64_t>(k);
            const uint8_t* in = tp->data + static_cast<size_t>(source_row(r)) * in_rb;
            if (to == tp->type) {
              std::copy(in, in + in_rb, dst + static_cast<size_t>(r) * out_rb);
              continue;
            }
            dequantize_row(tp->type, in, f.data(), cols);
            quantize_row(to, f.data(), dst + static_cast<size_t>(r) * out_rb, cols);
          }
        });
        *done += (r1 - r0) * cols;
        if (opt.progress) opt.progress(*done, total);
      }
    });
  }
  for (const auto& [k, n] : counts) sum.type_counts.emplace_back(k, n);
  // GgufWriter::write renames a whole file over `out`: a convert cut short
  // leaves the old file.
  if (auto st = w.write(out); !st.ok()) return st.error();
  return sum;
}

}  // namespace ss
