// llama2.c checkpoint + tokenizer.bin, as one input split in two.
#include "fuzz_files.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = ss::fuzz::split(data, size, 2);
  const std::string ckpt = ss::fuzz::write_file("model.bin", parts[0]);
  const std::string tok = ss::fuzz::write_file("tokenizer.bin", parts[1]);
  (void)ss::load_model({ckpt, tok});
  (void)ss::load_llama2c_vocab(tok, 512);
  return 0;
}
