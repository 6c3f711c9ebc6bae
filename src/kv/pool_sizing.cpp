#include "kv/pool_sizing.h"

namespace ss {

int sink_block_count(const KvPolicy& p, int block_tokens) {
  if (p.h2o()) return 0;  // H2O's sinks share its slots
  return static_cast<int>((p.sinks + block_tokens - 1) / block_tokens);
}

int64_t ring_token_count(const KvPolicy& p, int block_tokens, int max_chunk) {
  if (!p.bounded()) return 0;
  const int64_t B = block_tokens;
  // H2O: one slot per entry of each (layer, KV head), S + R + H + a chunk.
  const int64_t held = p.h2o() ? p.capacity() : p.window;
  return (held + max_chunk + B - 1) / B * B;
}

int blocks_per_sequence(const KvPolicy& p, int64_t tokens, int block_tokens, int max_chunk) {
  if (p.bounded())
    return sink_block_count(p, block_tokens) +
           static_cast<int>(ring_token_count(p, block_tokens, max_chunk) / block_tokens);
  return static_cast<int>((tokens + block_tokens - 1) / block_tokens);
}

}  // namespace ss
