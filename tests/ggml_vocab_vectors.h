#pragma once
// llama.cpp's tokenizer test vectors (test-tokenizer-0): the .inp file holds
// cases separated by "\n__ggml_vocab_test__\n", the .out file one line of
// ids per case (no BOS).
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"

namespace ss::test {

struct VocabVectors {
  std::vector<std::string> cases;
  std::vector<std::vector<int32_t>> ids;
};

inline VocabVectors read_vocab_vectors(const std::string& inp_path, const std::string& out_path) {
  VocabVectors v;
  const std::string inp = read_file(inp_path), out = read_file(out_path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t start = 0;;) {
    const size_t p = inp.find(sep, start);
    if (p == std::string::npos) break;
    v.cases.push_back(inp.substr(start, p - start));
    start = p + sep.size();
  }
  std::istringstream os(out);
  for (std::string line; std::getline(os, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t x; ls >> x;) ids.push_back(x);
    v.ids.push_back(ids);
  }
  return v;
}

}  // namespace ss::test
