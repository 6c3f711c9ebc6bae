#include <sys/stat.h>

#include "format/llama2c.h"
#include "model/model.h"

namespace ss {

namespace {

bool file_exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// llama2.c stores spaces as ' ' and BOS/EOS as "\n<s>\n"/"\n</s>\n"; map to the
// SentencePiece form the tokenizer works in.
Vocab vocab_from_llama2c(const Llama2cVocab& lv) {
  Vocab v;
  v.kind = VocabKind::Spm;
  v.scores = lv.scores;
  for (size_t i = 0; i < lv.pieces.size(); ++i) {
    std::string p;
    for (char ch : lv.pieces[i]) {
      if (ch == ' ')
        p += "\xE2\x96\x81";
      else
        p += ch;
    }
    TokenType t = TokenType::Normal;
    if (i == 0)
      t = TokenType::Unknown;
    else if (i == 1 || i == 2)
      t = TokenType::Control;
    else if (p.size() == 6 && p.rfind("<0x", 0) == 0 && p[5] == '>')
      t = TokenType::Byte;
    if (i == 1) p = "<s>";
    if (i == 2) p = "</s>";
    v.pieces.push_back(std::move(p));
    v.types.push_back(t);
  }
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.finalize();
  return v;
}

}  // namespace

Result<Vocab> load_llama2c_vocab(const std::string& path, int32_t vocab_size) {
  SS_ASSIGN_OR_RETURN(auto lv, load_llama2c_tokenizer(path, vocab_size));
  return vocab_from_llama2c(lv);
}

Result<std::shared_ptr<Model>> load_llama2c_model(const std::string& path, const std::string& tokenizer_path) {
  SS_ASSIGN_OR_RETURN(auto ck, load_llama2c_checkpoint(path));
  const auto& h = ck.header;
  std::string tok = tokenizer_path;
  if (tok.empty()) {
    const auto slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    for (const std::string& cand : {"tok" + std::to_string(h.vocab_size) + ".bin", std::string("tokenizer.bin")})
      if (file_exists(dir + "/" + cand)) {
        tok = dir + "/" + cand;
        break;
      }
    if (tok.empty()) return make_error(path + ": llama2.c checkpoint needs a tokenizer (-z tokenizer.bin)");
  }
  SS_ASSIGN_OR_RETURN(auto lv, load_llama2c_tokenizer(tok, h.vocab_size));
  auto m = std::make_shared<Model>();
  m->source = path;
  auto& c = m->config;
  c.arch_name = "llama";
  c.n_vocab = h.vocab_size;
  c.dim = h.dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.head_dim = h.dim / h.n_heads;
  c.hidden_dim = h.hidden_dim;
  c.trained_context = h.seq_len;
  c.norm_eps = 1e-5f;
  c.rotaries = {RotaryConfig{.dim = c.head_dim, .neox = false, .base = 10000.0}};
  c.uniform_layers();
  c.tied_output = h.shared_classifier;
  m->vocab = vocab_from_llama2c(lv);
  m->tok_embd = ck.tok_embd;
  m->output_norm = ck.output_norm;
  m->output = ck.output;
  for (const auto& l : ck.layers) {
    LayerWeights lw;
    lw.attn_norm = l.attn_norm;
    lw.wq = l.wq;
    lw.wk = l.wk;
    lw.wv = l.wv;
    lw.wo = l.wo;
    lw.ffn_norm = l.ffn_norm;
    lw.w_gate = l.w1;
    lw.w_down = l.w2;
    lw.w_up = l.w3;
    m->layers.push_back(lw);
  }
  m->keep_alive.push_back(ck.file);
  return m;
}

}  // namespace ss
