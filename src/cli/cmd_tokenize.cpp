// tokenize / detokenize: what a model's tokenizer makes of a text, in the
// forms llama.cpp's llama-tokenize prints (id -> 'piece' lines, or --ids).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/commands.h"
#include "model/tokenizer.h"
#include "util/mapped_file.h"

namespace ss::cli {

namespace {

// A model's vocabulary, or only a llama2.c tokenizer.bin when no model is
// named. A GGUF file gives its tokenizer alone: any architecture, and
// llama.cpp's vocab-only files, tokenize without weights.
Result<Vocab> load_vocab(const std::string& model, const std::string& tokenizer) {
  if (model.empty() && !tokenizer.empty()) return load_llama2c_vocab(tokenizer, -1);
  if (tokenizer.empty() && is_gguf_file(model)) return load_gguf_vocab_file(model);
  SS_ASSIGN_OR_RETURN(auto m, load_model(ModelLoadOptions{model.empty() ? default_model_path() : model, tokenizer}));
  return m->vocab;
}

void add_vocab_flags(Flags& sub, std::string& model, std::string& tokenizer) {
  sub.add("-m,--model", model, "model whose tokenizer to use (default: the bundled model)");
  sub.add("-z,--tokenizer", tokenizer, "llama2.c tokenizer.bin (alone: no model needed)");
}

// Printable piece: control characters escaped so one token stays on one line.
std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '\n')
      o += "\\n";
    else if (c == '\t')
      o += "\\t";
    else if (c == '\r')
      o += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o;
}

}  // namespace

TokenizeCommand::TokenizeCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "tokenize", "show how text tokenizes: id -> 'piece' per token, or --ids");
  add_vocab_flags(sub_, model_, tokenizer_);
  sub_.add("-p,--prompt", prompt_, "text to tokenize");
  sub_.add("-f,--file", file_, "read the text from a file (as is, no newline stripped)");
  sub_.flag("--stdin", stdin_, "read the text from standard input");
  sub_.flag("--ids", ids_, "print only the ids, as [1, 2, 3]");
  sub_.flag("--show-count", count_, "print the number of tokens last");
  sub_.flag("--no-bos", no_bos_, "do not add the BOS token the tokenizer would add");
  sub_.flag("--no-parse-special", no_parse_special_,
            "treat special-token texts such as <s> as plain text (default: they become their tokens)");
}

int TokenizeCommand::run() {
  std::string text = prompt_;
  if (!file_.empty()) {
    auto t = read_text_file(file_);
    if (!t.ok()) return fail(t.error().message);
    text = t.value();
  } else if (stdin_) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else if (prompt_.empty() && !sub_.count("--prompt")) {
    return fail("tokenize: give the text with -p TEXT, -f FILE or --stdin");
  }
  auto v = load_vocab(model_, tokenizer_);
  if (!v.ok()) return fail(v.error().message);
  const Tokenizer tok(v.value());
  const auto ids = tok.encode(text, !no_bos_ && v.value().add_bos, !no_parse_special_);
  if (ids_) {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
    std::printf("%s]\n", line.c_str());
  } else {
    for (int32_t id : ids) {
      const std::string& piece = v.value().pieces[static_cast<size_t>(id)];
      std::printf("%6d -> '%s'\n", id, printable(piece).c_str());
    }
  }
  if (count_) std::printf("Total number of tokens: %zu\n", ids.size());
  return 0;
}

DetokenizeCommand::DetokenizeCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "detokenize", "turn token ids back into text (ids as arguments, or on stdin)");
  add_vocab_flags(sub_, model_, tokenizer_);
  sub_.add("ids", ids_, "token ids: 1 2 3, or [1, 2, 3] (default: read from stdin)");
}

int DetokenizeCommand::run() {
  std::string joined;
  if (ids_.empty()) {
    joined.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    for (const auto& s : ids_) joined += s + " ";
  }
  for (char& c : joined)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  auto v = load_vocab(model_, tokenizer_);
  if (!v.ok()) return fail(v.error().message);
  std::vector<int32_t> ids;
  std::istringstream in(joined);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (...) {
      used = 0;
    }
    if (used != word.size()) return fail("detokenize: '" + word + "' is not a token id");
    if (id < 0 || id >= v.value().size())
      return fail("detokenize: token id " + word + " is outside the vocabulary [0, " +
                  std::to_string(v.value().size()) + ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  const Tokenizer tok(v.value());
  // Every byte, a NUL from <0x00> included (printf's %s would stop there).
  write_text(tok.decode(ids) + "\n", stdout);
  return 0;
}

}  // namespace ss::cli
