#pragma once
// The recognizer of a GBNF grammar (gbnf.h): which texts are still the
// prefix of one the grammar accepts, as llama.cpp's grammar sampler decides
// it, over code points, with UTF-8 read byte by byte across tokens (a
// byte-fallback token may carry half a character).
//
// The state is every parse still open, as a set of stacks of grammar
// positions (llama.cpp's representation). Stacks are linked lists whose
// nodes are interned, so equal stacks are one pointer and the set is
// deduplicated by comparing pointers; a rule referenced last in an
// alternative pushes nothing (a tail call), so `x ::= [a-z] x | ""` keeps
// one short stack however long the text; a stack met twice in one step is
// expanded once (loops through rules that may be empty come back to it, as
// in llama.cpp's matcher). Ambiguous grammars can still open
// many parses: past kMaxHeads stacks, or kMaxExpansions expansion steps for
// one character, the rest are dropped (the mask may then refuse what a
// dropped parse would take; it never allows what no parse takes).
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sample/gbnf.h"
#include "sample/token_trie.h"

namespace ss {

class GbnfMatcher {
 public:
  static constexpr size_t kMaxHeads = 1024;
  static constexpr size_t kMaxExpansions = 1 << 16;
  // Expansion steps one mask may take over the whole vocabulary (about 60
  // ms on a 2-core Zen 5 VM at 1024 open parses; grammars as ambiguous as
  // `(. | .. | [a-z]+ | [ -~]+)*` stay under it at 9 ms). Past it the walk stops, and the likeliest tokens not
  // reached are judged one by one until kRescued may come next: the mask
  // stays a subset of what may come next, and holds the model's favourites.
  static constexpr size_t kMaxMaskExpansions = size_t{1} << 21;
  static constexpr size_t kRescued = 64;

  struct Limits {  // the caps above; tests make them small
    size_t max_heads = kMaxHeads;
    size_t max_expansions = kMaxExpansions;
    size_t max_mask_expansions = kMaxMaskExpansions;
    size_t rescued = kRescued;
  };

  explicit GbnfMatcher(std::shared_ptr<const Gbnf> grammar) : GbnfMatcher(std::move(grammar), Limits{}) {}
  GbnfMatcher(std::shared_ptr<const Gbnf> grammar, const Limits& limits);
  GbnfMatcher(const GbnfMatcher&) = delete;
  GbnfMatcher& operator=(const GbnfMatcher&) = delete;

  // False (and the state is unchanged) if `bytes` cannot continue the text.
  // Read as characters only: token references match nothing here.
  bool feed(std::string_view bytes);
  // Token `id`, whose bytes are `bytes`: read as a whole by the parses whose
  // next element is a token reference, and as its characters by the others
  // (a token without bytes only by the former). False (the state unchanged)
  // if neither takes it. Should a token end mid-character for the
  // character readings while a reference takes it too, the reference's
  // parses are dropped (one partial character is kept for all parses).
  bool feed_token(int32_t id, std::string_view bytes);
  // The text is a whole root and nothing may follow it.
  bool complete() const { return cur_.left == 0 && cur_.accepted && cur_.heads.empty(); }
  // The text is a whole root (more may follow).
  bool can_end() const { return cur_.left == 0 && cur_.accepted; }

  // Sets logits[id] to -inf for every token that cannot come next, as
  // feed_token judges it (so tokens without bytes too, unless a token
  // reference takes them); the end-of-generation tokens `ends` keep their
  // logits where can_end(), and only there. Returns how many tokens stay
  // allowed.
  size_t mask(const TokenTrie& trie, std::span<float> logits, std::span<const int32_t> ends);

  // The state between two characters as grammar positions (each stack top
  // first, the stacks sorted, then whether the root was accepted), for
  // building automata over it (char_dfa.h): equal keys are equal states.
  std::vector<uint32_t> state_key() const;
  // Puts the matcher in the state `key` (a state_key() of this grammar)
  // describes, and clears dropped_parses().
  void load_state(std::span<const uint32_t> key);

  // Parses open now (stacks), for tests and the cost notes.
  size_t open_parses() const { return cur_.heads.size(); }
  // Expansion steps taken since the matcher was made (masks too): its work.
  size_t total_expansions() const { return total_expansions_; }
  // Whether a cap has dropped parses of the text fed so far.
  bool dropped_parses() const { return dropped_; }
  // Whether the last mask ran out of its budget (kMaxMaskExpansions).
  bool mask_was_cut() const { return mask_cut_; }

 private:
  struct Node {
    uint32_t pos;  // a grammar position: a character element on top, where to go on below
    uint64_t id;
    const Node* next;
  };
  struct Table {
    std::deque<Node> nodes;  // stable addresses
    std::unordered_map<uint64_t, const Node*> index;
  };
  struct State {
    std::vector<const Node*> heads;  // sorted by id, distinct; each on a character element
    bool accepted = false;           // some parse has ended the root
    uint32_t cp = 0;                 // a character partly read: its bits so far
    uint8_t left = 0;                // its continuation bytes to come
    uint8_t lo = 0x80, hi = 0xBF;    // the range of the next one
  };

  // Stacks an expansion step has met (open addressing; clear() is O(1)).
  class SeenSet {
   public:
    bool insert(uint64_t key);  // false if there already
    void clear();

   private:
    std::vector<uint64_t> keys_;
    std::vector<uint32_t> stamps_;  // a slot holds a key of this step if its stamp is now_
    uint32_t now_ = 0;
    size_t used_ = 0;
  };

  const Node* intern(uint32_t pos, const Node* next);
  // Every stack reached from position `pos` above `next` without reading.
  void expand(uint32_t pos, const Node* next, State& to);
  void advance(const State& from, uint32_t cp, State& to);
  bool step(const State& from, uint8_t byte, State& to);
  bool token_step(const State& from, int32_t id, State& to);
  // The tokens the token references of the state take, into allow.
  void allow_referenced(size_t vocab_size, std::vector<char>& allow) const;
  bool viable(const State& s) const;
  bool distinct(std::vector<const Node*>& heads) const;  // true if it dropped some
  void visit(const TokenTrie& trie, const TokenTrie::Node& n, size_t depth, std::vector<char>& allow);
  void rescue(const TokenTrie& trie, std::span<const float> logits, std::vector<char>& allow);
  void compact();

  std::shared_ptr<const Gbnf> g_;
  Limits limits_;
  Table base_;            // nodes of the state
  Table scratch_;         // nodes a mask makes and forgets
  bool in_mask_ = false;  // new nodes go to scratch_
  uint64_t next_id_ = 0;
  State cur_;
  std::vector<State> depth_states_;                     // mask: the state after each depth of the trie
  std::vector<std::pair<uint32_t, const Node*>> work_;  // expand's to-do list
  size_t expansions_ = 0;
  size_t total_expansions_ = 0;
  size_t mask_work_ = 0;  // expansion steps of the mask under way
  bool mask_cut_ = false;
  SeenSet seen_;
  bool dropped_ = false;
  static constexpr size_t kCompactAt = size_t{1} << 16;
  size_t compact_at_ = kCompactAt;  // base nodes before unreachable ones are dropped
};

}  // namespace ss
