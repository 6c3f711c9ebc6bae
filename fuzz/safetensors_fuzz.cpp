// HF directory: config.json + model.safetensors (+ tokenizer.json), as one
// input split in three.
#include "fuzz_files.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = ss::fuzz::split(data, size, 3);
  ss::fuzz::write_file("config.json", parts[0]);
  ss::fuzz::write_file("model.safetensors", parts[1]);
  ss::fuzz::write_file("tokenizer.json", parts[2]);
  (void)ss::load_model({ss::fuzz::temp_dir(), ""});
  return 0;
}
