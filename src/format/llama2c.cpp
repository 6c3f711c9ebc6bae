#include "format/llama2c.h"

#include <climits>
#include <cmath>

#include "util/byte_reader.h"

namespace ss {

Result<Llama2cCheckpoint> load_llama2c_checkpoint(const std::string& path) {
  SS_ASSIGN_OR_RETURN(auto f, MappedFile::open(path));
  return parse_llama2c_checkpoint(std::move(f));
}

Result<Llama2cCheckpoint> parse_llama2c_checkpoint(std::shared_ptr<MappedFile> file) {
  const std::string& path = file->path();
  ByteReader r(file->bytes());
  Llama2cCheckpoint ck;
  auto& h = ck.header;
  int32_t raw[7];
  for (auto& x : raw)
    if (!r.read(x)) return make_error(path + ": truncated llama2.c header (need 28 bytes)");
  h.dim = raw[0];
  h.hidden_dim = raw[1];
  h.n_layers = raw[2];
  h.n_heads = raw[3];
  h.n_kv_heads = raw[4];
  h.shared_classifier = raw[5] > 0;
  h.vocab_size = raw[5] == INT32_MIN ? 0 : (raw[5] < 0 ? -raw[5] : raw[5]);
  h.seq_len = raw[6];
  auto bad = [&](const char* what) { return make_error(path + ": invalid llama2.c header: " + what); };
  if (h.dim <= 0 || h.dim > (1 << 16)) return bad("dim");
  if (h.hidden_dim <= 0 || h.hidden_dim > (1 << 18)) return bad("hidden_dim");
  if (h.n_layers <= 0 || h.n_layers > 1024) return bad("n_layers");
  if (h.n_heads <= 0 || h.dim % h.n_heads != 0) return bad("n_heads must divide dim");
  if (h.n_kv_heads <= 0 || h.n_heads % h.n_kv_heads != 0) return bad("n_kv_heads must divide n_heads");
  if (h.vocab_size <= 0 || h.vocab_size > (1 << 24)) return bad("vocab_size");
  if (h.seq_len <= 0 || h.seq_len > (1 << 24)) return bad("seq_len");
  if ((h.dim / h.n_heads) % 2 != 0) return bad("head size must be even");

  const int64_t dim = h.dim, hid = h.hidden_dim, L = h.n_layers;
  const int64_t head = dim / h.n_heads, kv_dim = head * h.n_kv_heads;
  // Total floats the file must hold (freq_cis tables included).
  const int64_t need = h.vocab_size * dim + L * (2 * dim + 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hid) + dim +
                       h.seq_len * head + (h.shared_classifier ? 0 : h.vocab_size * dim);
  if (static_cast<uint64_t>(need) * 4 > r.remaining())
    return make_error(path + ": truncated llama2.c checkpoint: header promises " + std::to_string(need * 4 + 28) +
                      " bytes, file has " + std::to_string(file->bytes().size()));

  const uint8_t* base = file->bytes().data() + 28;
  int64_t off = 0;  // in floats
  auto take = [&](const std::string& name, int64_t ne0, int64_t ne1) {
    TensorView v;
    v.name = name;
    v.type = GgmlType::F32;
    v.ne0 = ne0;
    v.ne1 = ne1;
    v.data = base + off * 4;
    off += ne0 * ne1;
    return v;
  };
  ck.tok_embd = take("token_embedding", dim, h.vocab_size);
  ck.layers.resize(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) ck.layers[l].attn_norm = take("rms_att", dim, 1);
  for (int64_t l = 0; l < L; ++l) ck.layers[l].wq = take("wq", dim, dim);
  for (int64_t l = 0; l < L; ++l) ck.layers[l].wk = take("wk", dim, kv_dim);
  for (int64_t l = 0; l < L; ++l) ck.layers[l].wv = take("wv", dim, kv_dim);
  for (int64_t l = 0; l < L; ++l) ck.layers[l].wo = take("wo", dim, dim);
  for (int64_t l = 0; l < L; ++l) ck.layers[l].ffn_norm = take("rms_ffn", dim, 1);
  for (int64_t l = 0; l < L; ++l) ck.layers[l].w1 = take("w1", dim, hid);
  for (int64_t l = 0; l < L; ++l) ck.layers[l].w2 = take("w2", hid, dim);
  for (int64_t l = 0; l < L; ++l) ck.layers[l].w3 = take("w3", dim, hid);
  ck.output_norm = take("rms_final", dim, 1);
  off += h.seq_len * head;  // freq_cis_real + freq_cis_imag (unused: RoPE is computed)
  ck.output = h.shared_classifier ? ck.tok_embd : take("wcls", dim, h.vocab_size);
  ck.file = std::move(file);
  return ck;
}

Result<Llama2cVocab> load_llama2c_tokenizer(const std::string& path, int32_t vocab_size) {
  SS_ASSIGN_OR_RETURN(auto f, MappedFile::open(path));
  return parse_llama2c_tokenizer(f->bytes(), path, vocab_size);
}

Result<Llama2cVocab> parse_llama2c_tokenizer(std::span<const uint8_t> bytes, const std::string& path,
                                             int32_t vocab_size) {
  ByteReader r(bytes);
  Llama2cVocab v;
  if (!r.read(v.max_token_length)) return make_error(path + ": truncated tokenizer.bin header");
  if (v.max_token_length == 0 || v.max_token_length > 4096)
    return make_error(path + ": invalid max_token_length " + std::to_string(v.max_token_length));
  // vocab_size < 0: read entries until the end of the file.
  for (int32_t i = 0; vocab_size < 0 ? r.remaining() > 0 : i < vocab_size; ++i) {
    if (i >= (1 << 24)) return make_error(path + ": implausibly many tokenizer entries");
    float score;
    int32_t len;
    if (!r.read(score) || !r.read(len))
      return make_error(path + ": truncated tokenizer.bin at entry " + std::to_string(i) + " of " +
                        std::to_string(vocab_size) + " (is it the model's tokenizer?)");
    if (len < 0 || static_cast<uint32_t>(len) > v.max_token_length || !std::isfinite(score))
      return make_error(path + ": corrupt tokenizer.bin entry " + std::to_string(i));
    std::string s;
    if (!r.read_bytes(static_cast<size_t>(len), s))
      return make_error(path + ": truncated tokenizer.bin piece " + std::to_string(i));
    v.pieces.push_back(std::move(s));
    v.scores.push_back(score);
  }
  return v;
}

}  // namespace ss
