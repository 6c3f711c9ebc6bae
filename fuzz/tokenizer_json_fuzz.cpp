// tokenizer.json alone, against the vocabulary size of a fixed config.
#include "fuzz_files.h"
#include "model/model.h"
#include "model/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ss::fuzz::write_file("tokenizer.json", {reinterpret_cast<const char*>(data), size});
  ss::Vocab v;
  for (int32_t n_vocab : {0, 300, 2048})
    if (ss::load_tokenizer_json(path, n_vocab, v).ok()) {
      ss::Tokenizer tok(v);
      (void)tok.encode("Hello, world! 123 \xC3\xA9", true);
    }
  return 0;
}
