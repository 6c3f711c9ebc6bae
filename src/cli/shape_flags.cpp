#include "cli/shape_flags.h"

#include <nlohmann/json.hpp>

#include "util/mapped_file.h"

namespace ss::cli {

namespace {
// The text of a flag or of the file another flag names ("" when neither).
Result<std::string> text_or_file(const std::string& text, const std::string& file) {
  if (file.empty()) return text;
  return read_text_file(file);
}
}  // namespace

void ShapeFlags::add(Flags& app, const std::string& what) {
  auto j = app.add("-j,--json-schema", json_schema,
                   "constrain " + what +
                       " to JSON this schema accepts ('{}': any JSON value); it ends when the "
                       "value closes (the server's structured output; README)");
  auto jf = app.add("--jf,--json-schema-file", json_schema_file, "read the JSON schema from a file").excludes(j);
  auto g = app.add("--grammar", grammar,
                   "constrain " + what +
                       " to a GBNF grammar (llama.cpp's format; README); it ends when nothing "
                       "more may follow");
  g.excludes(j).excludes(jf);
  app.add("--grammar-file", grammar_file, "read the GBNF grammar from a file").excludes(j).excludes(jf).excludes(g);
}

Result<ShapeFlags::Loaded> ShapeFlags::load(const GbnfTokens* tokens) const {
  Loaded out;
  SS_ASSIGN_OR_RETURN(const std::string schema, text_or_file(json_schema, json_schema_file));
  if (!schema.empty()) {
    const nlohmann::json j = nlohmann::json::parse(schema, nullptr, false);
    if (j.is_discarded()) return make_error("the JSON schema is not JSON");
    SS_ASSIGN_OR_RETURN(out.schema, JsonSchema::compile(j));
  }
  SS_ASSIGN_OR_RETURN(const std::string gbnf, text_or_file(grammar, grammar_file));
  if (!gbnf.empty()) {
    SS_ASSIGN_OR_RETURN(out.grammar, Gbnf::parse(gbnf, tokens));
  }
  return out;
}

}  // namespace ss::cli
