// GGUF header, metadata, tensor table and the model built from it.
#include "fuzz_files.h"
#include "model/model.h"
#include "model/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ss::fuzz::write_file("in.gguf", {reinterpret_cast<const char*>(data), size});
  auto m = ss::load_model({path, ""});
  if (m.ok()) {
    // A model that loads must also tokenize and detokenize without trouble.
    ss::Tokenizer tok(m.value()->vocab);
    const auto ids = tok.encode("Once upon a time", true);
    std::string text;
    for (int32_t id : ids) text += tok.token_bytes(id);
  }
  return 0;
}
