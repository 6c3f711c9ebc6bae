#include "model/tokenizer.h"

#include <algorithm>
#include <queue>

#include "util/check.h"

namespace ss {

namespace {

const std::string kSpaceMark = "\xE2\x96\x81";  // U+2581

// One symbol of a word being merged; a doubly linked list over a vector.
struct Symbol {
  std::string text;
  int prev, next;
  bool fixed;  // cannot take part in merges (unknown character)
};

struct Candidate {
  double score;  // higher merges first
  int left, right;
  size_t len;  // combined byte length, to detect stale entries
  bool operator<(const Candidate& o) const {
    if (score != o.score) return score < o.score;
    return left > o.left;  // leftmost first on ties
  }
};

// Repeatedly merges the best-scoring adjacent pair (leftmost on ties) until no
// pair scores. score(a, b) returns false when a+b may not merge.
template <typename ScoreFn>
void merge_symbols(std::vector<Symbol>& syms, ScoreFn score) {
  std::priority_queue<Candidate> q;
  auto consider = [&](int l, int r) {
    if (l < 0 || r < 0 || syms[l].fixed || syms[r].fixed) return;
    double s;
    if (score(syms[l].text, syms[r].text, s)) q.push({s, l, r, syms[l].text.size() + syms[r].text.size()});
  };
  for (int i = 0; i + 1 < static_cast<int>(syms.size()); ++i) consider(i, i + 1);
  while (!q.empty()) {
    const Candidate c = q.top();
    q.pop();
    Symbol& L = syms[c.left];
    Symbol& R = syms[c.right];
    if (L.text.empty() || R.text.empty() || L.next != c.right || L.text.size() + R.text.size() != c.len) continue;
    L.text += R.text;
    R.text.clear();
    L.next = R.next;
    if (R.next >= 0) syms[R.next].prev = c.left;
    consider(L.prev, c.left);
    consider(c.left, L.next);
  }
}

std::string replace_spaces(std::string_view text) {
  std::string s;
  s.reserve(text.size() + 8);
  for (char ch : text) {
    if (ch == ' ')
      s += kSpaceMark;
    else
      s += ch;
  }
  return s;
}

}  // namespace

Tokenizer::Tokenizer(const Vocab& vocab) : vocab_(vocab) {
  for (size_t r = 0; r < vocab_.merges.size(); ++r) {
    std::string key = vocab_.merges[r].first;
    key += '\0';
    key += vocab_.merges[r].second;
    merge_ranks_.emplace(std::move(key), static_cast<int32_t>(r));
  }
  for (int32_t id = 0; id < vocab_.size(); ++id) {
    const auto t = vocab_.types[static_cast<size_t>(id)];
    if ((t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) &&
        !vocab_.pieces[static_cast<size_t>(id)].empty())
      specials_.push_back(id);
  }
  std::stable_sort(specials_.begin(), specials_.end(), [&](int32_t a, int32_t b) {
    return vocab_.pieces[static_cast<size_t>(a)].size() > vocab_.pieces[static_cast<size_t>(b)].size();
  });
  // GPT-2's reversible byte <-> printable code point map.
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    uint32_t cp;
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
      cp = static_cast<uint32_t>(b);
    else
      cp = 256 + static_cast<uint32_t>(extra++);
    utf8_append(byte_to_unicode_[b], cp);
    unicode_to_byte_[cp] = static_cast<uint8_t>(b);
  }
}

int32_t Tokenizer::merge_rank(const std::string& a, const std::string& b) const {
  std::string key = a;
  key += '\0';
  key += b;
  auto it = merge_ranks_.find(key);
  return it == merge_ranks_.end() ? -1 : it->second;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> ids;
  if (add_bos && vocab_.bos >= 0) ids.push_back(vocab_.bos);
  if (text.empty()) return ids;
  // Special-token texts split the text as llama.cpp's tokenizer_st_partition
  // does: one special at a time, longest first, at every place it occurs in
  // what is still plain text. User-defined tokens split it even without
  // parse_special (as Hugging Face's added tokens do); control and unknown
  // ones only with it.
  struct Piece {
    size_t at, len;
    int32_t token;  // >= 0: a special token, else text [at, at + len)
  };
  std::vector<Piece> pieces{{0, text.size(), -1}}, split;
  for (int32_t id : specials_) {
    if (!parse_special && vocab_.types[static_cast<size_t>(id)] != TokenType::UserDefined) continue;
    const std::string& p = vocab_.pieces[static_cast<size_t>(id)];
    split.clear();
    for (const Piece& pc : pieces) {
      if (pc.token >= 0) {
        split.push_back(pc);
        continue;
      }
      const size_t end = pc.at + pc.len;
      size_t at = pc.at;
      for (size_t m; (m = text.substr(0, end).find(p, at)) != std::string_view::npos; at = m + p.size()) {
        if (m > at) split.push_back({at, m - at, -1});
        split.push_back({m, p.size(), id});
      }
      if (at < end) split.push_back({at, end - at, -1});
    }
    pieces.swap(split);
  }
  // SentencePiece-style vocabs put their space prefix before the first text
  // and before every text that follows a special token (llama.cpp's SPM
  // tokenizer; Hugging Face normalizes each piece between added tokens).
  bool after_special = true;
  for (const Piece& pc : pieces) {
    if (pc.token >= 0) {
      ids.push_back(pc.token);
      after_special = true;
      continue;
    }
    const auto body = encode_fragment(text.substr(pc.at, pc.len), after_special);
    ids.insert(ids.end(), body.begin(), body.end());
    after_special = false;
  }
  return ids;
}

std::vector<int32_t> Tokenizer::encode_fragment(std::string_view text, bool at_start) const {
  return vocab_.kind == VocabKind::ByteLevel ? encode_byte_level(text) : encode_spm_like(text, at_start);
}

std::vector<int32_t> Tokenizer::encode_spm_like(std::string_view text, bool at_start) const {
  const std::string norm = (vocab_.add_space_prefix && at_start ? kSpaceMark : std::string()) + replace_spaces(text);
  std::vector<Symbol> syms;
  const auto chars = utf8_chars(norm);
  syms.reserve(chars.size());
  const bool rank_bpe = vocab_.kind == VocabKind::RankBpe;
  for (size_t i = 0; i < chars.size(); ++i) {
    const bool known = vocab_.find(chars[i]) >= 0;
    syms.push_back(
        {chars[i], static_cast<int>(i) - 1, i + 1 < chars.size() ? static_cast<int>(i) + 1 : -1, rank_bpe && !known});
  }
  if (rank_bpe) {
    merge_symbols(syms, [&](const std::string& a, const std::string& b, double& s) {
      const int32_t r = merge_rank(a, b);
      if (r < 0 || vocab_.find(a + b) < 0) return false;
      s = -static_cast<double>(r);
      return true;
    });
  } else {
    merge_symbols(syms, [&](const std::string& a, const std::string& b, double& s) {
      const int32_t id = vocab_.find(a + b);
      if (id < 0) return false;
      s = vocab_.scores[static_cast<size_t>(id)];
      return true;
    });
  }
  std::vector<int32_t> ids;
  bool last_unk = false;
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    const int32_t id = vocab_.find(syms[i].text);
    if (id >= 0) {
      ids.push_back(id);
      last_unk = false;
      continue;
    }
    // Byte fallback; unknown when the vocab lacks byte tokens.
    bool all_bytes = true;
    for (unsigned char b : syms[i].text) all_bytes = all_bytes && vocab_.byte_token(b) >= 0;
    if (all_bytes) {
      for (unsigned char b : syms[i].text) ids.push_back(vocab_.byte_token(b));
      last_unk = false;
    } else if (vocab_.unk >= 0 && !(vocab_.fuse_unk && last_unk)) {
      ids.push_back(vocab_.unk);
      last_unk = true;
    }
  }
  return ids;
}

void Tokenizer::rank_merge_word(const std::string& word, std::vector<int32_t>& out) const {
  if (const int32_t whole = vocab_.find(word); whole >= 0 && vocab_.ignore_merges) {
    out.push_back(whole);
    return;
  }
  const auto chars = utf8_chars(word);
  std::vector<Symbol> syms;
  for (size_t i = 0; i < chars.size(); ++i)
    syms.push_back({chars[i], static_cast<int>(i) - 1, i + 1 < chars.size() ? static_cast<int>(i) + 1 : -1, false});
  merge_symbols(syms, [&](const std::string& a, const std::string& b, double& s) {
    const int32_t r = merge_rank(a, b);
    if (r < 0) return false;
    s = -static_cast<double>(r);
    return true;
  });
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    const int32_t id = vocab_.find(syms[i].text);
    if (id >= 0)
      out.push_back(id);
    else if (vocab_.unk >= 0)
      out.push_back(vocab_.unk);
  }
}

std::vector<int32_t> Tokenizer::encode_byte_level(std::string_view text) const {
  std::vector<int32_t> ids;
  for (const auto& word : pretokenize(text, vocab_.pre)) {
    std::string mapped;
    for (unsigned char b : word) mapped += byte_to_unicode_[b];
    rank_merge_word(mapped, ids);
  }
  return ids;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_.size()) return {};
  const auto type = vocab_.types[static_cast<size_t>(id)];
  const std::string& p = vocab_.pieces[static_cast<size_t>(id)];
  if (type == TokenType::Control || type == TokenType::Unused) return {};
  if (type == TokenType::Unknown) return vocab_.kind == VocabKind::Spm ? " \xE2\x81\x87 " : p;
  if (type == TokenType::Byte ||
      (p.size() == 6 && p.rfind("<0x", 0) == 0 && p[5] == '>' && vocab_.kind != VocabKind::ByteLevel)) {
    return std::string(1, static_cast<char>(std::stoi(p.substr(3, 2), nullptr, 16)));
  }
  if (vocab_.kind == VocabKind::ByteLevel) {
    if (type == TokenType::UserDefined) return p;
    std::string out;
    for (size_t i = 0; i < p.size();) {
      const uint32_t cp = utf8_next(p, i);
      auto it = unicode_to_byte_.find(cp);
      if (it != unicode_to_byte_.end())
        out += static_cast<char>(it->second);
      else
        utf8_append(out, cp);
    }
    return out;
  }
  std::string out;
  for (size_t i = 0; i < p.size();) {
    if (p.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
      out += ' ';
      i += kSpaceMark.size();
    } else {
      out += p[i++];
    }
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  Detokenizer d(*this);
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  return out + d.flush();
}

std::string Tokenizer::answer_bytes(int32_t id, bool first) const {
  std::string bytes = token_bytes(id);
  // SentencePiece-style vocabularies mark the word start with a space that
  // is not part of the text.
  if (first && !bytes.empty() && bytes[0] == ' ' && vocab_.kind != VocabKind::ByteLevel && vocab_.add_space_prefix)
    bytes.erase(0, 1);
  return bytes;
}

std::string Detokenizer::push(int32_t id) {
  std::string bytes = tok_->token_bytes(id);
  if (bytes.empty()) return {};
  if (at_start_) {
    bytes = tok_->answer_bytes(id, true);
    at_start_ = false;
  }
  return buf_.push(bytes);
}

}  // namespace ss
