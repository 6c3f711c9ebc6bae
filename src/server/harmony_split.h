#pragma once
// gpt-oss answers in Harmony channels: its reasoning in `analysis`, the
// answer in `final`, each message framed by markers:
//   <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...
// HarmonySplit takes that text as it streams (in any pieces) and hands back
// what can be shown now, as reasoning and as content, without the markers.
// The markers are whole tokens, but a caller may cut text anywhere: a tail
// that could begin a marker is held until the next piece. Text that is not
// Harmony (no header where one should be) is content as it is.
#include <memory>
#include <string>
#include <string_view>

#include "sample/constraint.h"
#include "sample/gbnf.h"

namespace ss {

// What a gpt-oss answer writes before its final text, as a grammar: an
// optional analysis message (any text without <|end|>), then the final
// channel's header (llama.cpp's gpt-oss grammar reads the same):
//   (<|channel|>analysis<|message|>...<|end|><|start|>assistant)?
//   <|channel|>final( <|constrain|>json)?<|message|>
// Structured output shapes what follows (Constraint's lead). The markers
// are matched as text, which the Harmony tokens are (vocab.cpp). The
// reasoning is any text up to its first <|end|> (a right-linear automaton:
// three parses open at a time, where llama.cpp's alternatives keep eight).
std::shared_ptr<const Gbnf> harmony_final_lead();
// That lead, then `schema` or `grammar` (one of the two) for the final text.
ShapePlan harmony_final_plan(std::shared_ptr<const JsonSchema> schema, std::shared_ptr<const Gbnf> grammar);
// GBNF rules for leads: `analysis` (the optional reasoning message and the
// next message's <|start|>assistant) and `final` (the final channel's header).
std::string harmony_analysis_rules();

class HarmonySplit {
 public:
  struct Parts {
    std::string reasoning;  // analysis and commentary channels
    std::string content;    // the final channel
  };

  Parts push(std::string_view text);
  // The rest at the end of generation (an unfinished header is dropped).
  Parts finish();
  // push(text), and with done also finish(): what a streaming caller shows.
  Parts take(std::string_view text, bool done);

 private:
  enum class State { Header, Body };
  void run(Parts& out, bool at_end);

  State state_ = State::Header;  // the prompt ends with <|start|>assistant
  bool final_ = false;           // the current message is the final channel
  bool plain_ = false;           // not Harmony: everything is content
  std::string pending_;          // bytes not yet classified
};

}  // namespace ss
