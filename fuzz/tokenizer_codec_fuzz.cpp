// Tokenizer encode, every pre-tokenizer, and streaming decode of arbitrary bytes with real
// vocabularies (SentencePiece from stories260K, byte-level BPE from the 656K
// tokenizer.json): the first byte picks one, the rest is the text; decode
// runs on ids read from the same bytes.
#include <memory>

#include "fuzz_files.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "util/utf8.h"

namespace {
std::string shared_dir() {
  if (const char* s = std::getenv("SINKSTREAM_SHARED")) return s;
  return SS_SHARED_DEFAULT;
}

const ss::Tokenizer* tokenizer(int which) {
  static std::unique_ptr<ss::Tokenizer> spm, bpe;
  static std::shared_ptr<const ss::Model> m1, m2;
  if (!m1) {
    auto a = ss::load_model({shared_dir() + "/models/stories260K/stories260K.gguf", ""});
    auto b = ss::load_model({shared_dir() + "/models/tinystories-656k", ""});
    if (!a.ok() || !b.ok()) std::abort();  // the fuzzer needs ../shared
    m1 = a.value();
    m2 = b.value();
    spm = std::make_unique<ss::Tokenizer>(m1->vocab);
    bpe = std::make_unique<ss::Tokenizer>(m2->vocab);
  }
  return which ? bpe.get() : spm.get();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const ss::Tokenizer& tok = *tokenizer(data[0] & 1);
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto ids = tok.encode(text, (data[0] & 2) != 0, (data[0] & 4) != 0);
  // Every byte-level pre-tokenizer covers the text exactly, in order.
  for (int k = static_cast<int>(ss::PreTokenizer::Gpt2); k <= static_cast<int>(ss::PreTokenizer::Default); ++k) {
    std::string joined;
    for (const auto& piece : ss::pretokenize(text, static_cast<ss::PreTokenizer>(k))) joined += piece;
    if (joined != text) std::abort();
  }
  ss::Detokenizer d(tok);
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  out += d.flush();
  // Ids taken from the raw bytes, in range or not, decode without trouble.
  ss::Detokenizer d2(tok);
  for (size_t i = 1; i + 1 < size; i += 2) {
    const int32_t id = static_cast<int32_t>(data[i] | (data[i + 1] << 8)) - 1000;
    if (id >= 0 && id < tok.vocab().size()) out += d2.push(id);
  }
  out += d2.flush();
  return 0;
}
