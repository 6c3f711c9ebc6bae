#include "server/metrics_text.h"

#include <sstream>

namespace ss {

namespace {
void histogram(std::ostringstream& o, const char* name, const char* help, const Histogram& h) {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  for (size_t b = 0; b < h.bounds.size(); ++b)
    o << name << "_bucket{le=\"" << h.bounds[b] << "\"} " << h.counts[b] << "\n";
  o << name << "_bucket{le=\"+Inf\"} " << h.count << "\n"
    << name << "_sum " << h.sum << "\n"
    << name << "_count " << h.count << "\n";
}
}  // namespace

std::string render_metrics(const SchedulerMetrics& m) {
  std::ostringstream o;
  auto metric = [&](const char* name, const char* type, const char* help, int64_t v) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << v << "\n";
  };
  metric("sinkstream_requests_total", "counter", "Generation requests accepted.", m.requests_total);
  metric("sinkstream_requests_rejected_total", "counter",
         "Requests refused for capacity (queue full, session limit, KV pool too small).", m.requests_rejected);
  metric("sinkstream_requests_preempted_total", "counter", "Requests failed because a step could not get KV blocks.",
         m.preempted);
  metric("sinkstream_requests_cancelled_total", "counter",
         "Requests that ended because their client disconnected (or at shutdown).", m.cancelled);
  metric("sinkstream_tokens_in_total", "counter", "Prompt tokens prefilled.", m.tokens_in);
  metric("sinkstream_tokens_out_total", "counter", "Tokens generated.", m.tokens_out);
  metric("sinkstream_active_requests", "gauge", "Requests in the running batch.", m.active);
  metric("sinkstream_queue_depth", "gauge", "Requests waiting to join the batch.", m.queued);
  metric("sinkstream_sessions", "gauge", "Sessions known (resident or spilled).", m.sessions);
  metric("sinkstream_sessions_resident", "gauge", "Sessions whose KV is in the pool.", m.sessions_resident);
  metric("sinkstream_sessions_spilled", "gauge", "Idle sessions whose KV is on disk, restored on their next turn.",
         m.sessions_spilled);
  metric("sinkstream_session_spills_total", "counter", "Idle sessions moved out of the pool (least recently used).",
         m.session_spills);
  metric("sinkstream_session_restores_total", "counter", "Spilled sessions brought back into the pool.",
         m.session_restores);
  metric("sinkstream_kv_blocks_used", "gauge", "KV blocks in use.", m.kv_blocks_used);
  metric("sinkstream_kv_blocks_free", "gauge", "KV blocks free.", m.kv_blocks_total - m.kv_blocks_used);
  metric("sinkstream_kv_blocks_shared", "gauge", "KV blocks of shared sinks (registered for adoption).",
         m.kv_blocks_shared);
  metric("sinkstream_persist_errors_total", "counter", "Session state writes that failed.", m.persist_errors);
  metric("sinkstream_store_reloads_total", "counter",
         "Sessions read from the shared state directory because another replica served their last turn.",
         m.store_reloads);
  metric("sinkstream_session_restore_fallbacks_total", "counter",
         "Sessions restored from their previous copy because the newest file was bad.", m.session_fallbacks);
  metric("sinkstream_session_files_rejected_total", "counter", "Session files that could not be restored at all.",
         m.session_files_rejected);
  metric("sinkstream_session_files_discarded_total", "counter",
         "Corrupt newest session files dropped on save rather than kept as the backup.", m.session_files_discarded);
  histogram(o, "sinkstream_token_latency_ms", "Time of the batched step that produced each generated token.",
            m.token_latency_ms);
  histogram(o, "sinkstream_batch_size", "Sequences in each batched forward step.", m.batch_size);
  return o.str();
}

}  // namespace ss
