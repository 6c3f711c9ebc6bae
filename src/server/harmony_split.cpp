#include "server/harmony_split.h"

#include <algorithm>
#include <array>

#include "server/harmony_markers.h"
#include "util/check.h"

namespace ss {

namespace {

using harmony::kChannel;
using harmony::kMessage;
// A header longer than this without <|message|> is not a header.
constexpr size_t kMaxHeader = 512;

// Markers that end a message body; <|start|> and <|channel|> also begin the
// next header, so they stay in the text for it.
struct Marker {
  std::string_view text;
  bool consumed;
};
constexpr std::array<Marker, 5> kBodyEnds = {{{harmony::kEnd, true},
                                              {harmony::kReturn, true},
                                              {harmony::kCall, true},
                                              {harmony::kStart, false},
                                              {kChannel, false}}};

// Length of the longest suffix of s that is a proper prefix of a marker.
size_t marker_prefix_tail(std::string_view s) {
  size_t best = 0;
  for (const auto& m : kBodyEnds)
    for (size_t len = std::min(s.size(), m.text.size() - 1); len > best; --len)
      if (s.substr(s.size() - len) == m.text.substr(0, len)) {
        best = len;
        break;
      }
  return best;
}

}  // namespace

HarmonySplit::Parts HarmonySplit::push(std::string_view text) {
  Parts out;
  pending_.append(text);
  run(out, false);
  return out;
}

HarmonySplit::Parts HarmonySplit::finish() {
  Parts out;
  run(out, true);
  pending_.clear();
  return out;
}

HarmonySplit::Parts HarmonySplit::take(std::string_view text, bool done) {
  Parts out = push(text);
  if (done) {
    const Parts rest = finish();
    out.reasoning += rest.reasoning;
    out.content += rest.content;
  }
  return out;
}

void HarmonySplit::run(Parts& out, bool at_end) {
  while (!pending_.empty()) {
    if (plain_) {
      out.content += pending_;
      pending_.clear();
      return;
    }
    if (state_ == State::Header) {
      // A header is markers and their words (<|start|>assistant, a channel
      // name, " to=...", <|constrain|>json) up to <|message|>.
      if (pending_.rfind("<|", 0) != 0 && std::string_view("<|").substr(0, pending_.size()) != pending_) {
        plain_ = true;  // the model wrote text where a header belongs
        continue;
      }
      const size_t at = pending_.find(kMessage);
      if (at == std::string::npos) {
        if (pending_.size() > kMaxHeader) plain_ = true;
        if (at_end && !plain_) pending_.clear();
        if (!plain_) return;
        continue;
      }
      const std::string_view header = std::string_view(pending_).substr(0, at);
      const size_t ch = header.find(kChannel);
      std::string_view channel;
      if (ch != std::string_view::npos) {
        channel = header.substr(ch + kChannel.size());
        channel = channel.substr(0, std::min(channel.find(' '), channel.find("<|")));
      }
      final_ = channel == "final";
      pending_.erase(0, at + kMessage.size());
      state_ = State::Body;
      continue;
    }
    // Body: up to the first marker that ends it.
    size_t end = std::string::npos;
    const Marker* hit = nullptr;
    for (const auto& m : kBodyEnds) {
      const size_t at = pending_.find(m.text);
      if (at < end) {
        end = at;
        hit = &m;
      }
    }
    std::string& sink = final_ ? out.content : out.reasoning;
    if (hit) {
      sink.append(pending_, 0, end);
      pending_.erase(0, end + (hit->consumed ? hit->text.size() : 0));
      state_ = State::Header;
      continue;
    }
    const size_t keep = at_end ? 0 : marker_prefix_tail(pending_);
    sink.append(pending_, 0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return;
  }
}

std::string harmony_analysis_rules() {
  // s0..s6: how much of "<|end|>" the text ends with; the body may end in
  // any of them (the closing marker follows), and reads no "<|end|>".
  return "analysis ::= \"<|channel|>analysis<|message|>\" s0 \"<|end|><|start|>assistant\"\n"
         "s0 ::= ([^<] s0 | \"<\" s1)?\n"
         "s1 ::= ([^|<] s0 | \"<\" s1 | \"|\" s2)?\n"
         "s2 ::= ([^e<] s0 | \"<\" s1 | \"e\" s3)?\n"
         "s3 ::= ([^n<] s0 | \"<\" s1 | \"n\" s4)?\n"
         "s4 ::= ([^d<] s0 | \"<\" s1 | \"d\" s5)?\n"
         "s5 ::= ([^|<] s0 | \"<\" s1 | \"|\" s6)?\n"
         "s6 ::= ([^><] s0 | \"<\" s1)?\n"
         "final ::= \"<|channel|>final\" (\" \" \"<|constrain|>\"? [a-zA-Z0-9_-]+)? \"<|message|>\"\n";
}

std::shared_ptr<const Gbnf> harmony_final_lead() {
  static const std::shared_ptr<const Gbnf> lead = [] {
    auto g = Gbnf::parse("root ::= analysis? final\n" + harmony_analysis_rules());
    SS_CHECK(g.ok());
    return *g;
  }();
  return lead;
}

ShapePlan harmony_final_plan(std::shared_ptr<const JsonSchema> schema, std::shared_ptr<const Gbnf> grammar) {
  return ShapePlan{harmony_final_lead(), {{std::move(schema), std::move(grammar)}}, nullptr};
}

}  // namespace ss
