#pragma once
// The answer's shape on the command line, as llama.cpp spells it:
// -j/--json-schema, --jf/--json-schema-file, --grammar, --grammar-file.
#include <memory>
#include <string>

#include "cli/flags.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "sample/constraint.h"
#include "util/result.h"

namespace ss::cli {

struct ShapeFlags {
  std::string json_schema, json_schema_file;  // structured output (llama.cpp's -j / -jf)
  std::string grammar, grammar_file;          // GBNF (llama.cpp's --grammar / --grammar-file)
  // `what` ends the help texts: where the answer ends ("the answer", "each answer").
  void add(Flags& app, const std::string& what);

  struct Loaded {
    std::shared_ptr<const JsonSchema> schema;  // at most one of the two
    std::shared_ptr<const Gbnf> grammar;
    bool any() const { return schema || grammar; }
  };
  // Read and compiled; a grammar's token references resolve in `tokens`
  // (the model's vocabulary: gbnf_tokens()).
  Result<Loaded> load(const GbnfTokens* tokens) const;
};

}  // namespace ss::cli
