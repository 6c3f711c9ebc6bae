#pragma once
// How many blocks a sequence holds: the one formula. SequenceKv allocates by
// it and everyone who sizes a pool asks it, so the two cannot drift apart.
#include <cstdint>

#include "kv/policy.h"

namespace ss {

// Pinned blocks for the first S tokens: ceil(S / B).
int sink_block_count(const KvPolicy& p, int block_tokens);
// Tokens of the window's ring for a bounded policy: W + max_chunk rounded up
// to whole blocks (a prefill chunk never overwrites a key one of its own
// queries still needs); 0 for dense (an unbounded list). H2O: the slots of
// its slot table, S + R + H + max_chunk rounded up (no separate sink blocks).
int64_t ring_token_count(const KvPolicy& p, int block_tokens, int max_chunk);
// Most blocks one sequence holds: sinks + ring for bounded policies (any
// length), ceil(tokens / B) for dense.
int blocks_per_sequence(const KvPolicy& p, int64_t tokens, int block_tokens, int max_chunk);

}  // namespace ss
