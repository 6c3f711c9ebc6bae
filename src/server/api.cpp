#include "server/api.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <sstream>

#include "sample/constraint.h"
#include "server/harmony_tools.h"
#include "server/json_text.h"
#include "server/metrics_text.h"
#include "server/request_parse.h"
#include "server/session_lease.h"
#include "server/tokenize_api.h"
#include "server/tool_calls.h"
#include "server/web_page.h"

namespace ss {

namespace {

using nlohmann::json;

json error_body(const std::string& msg, const std::string& type, const std::string& param = "") {
  return {
      {"error",
       {{"message", msg}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)}, {"code", nullptr}}}};
}

std::string error_type(int status) {
  return status == 401   ? "authentication_error"
         : status == 403 ? "permission_error"
         : status == 404 ? "not_found_error"
         : status == 429 ? "rate_limit_error"
         : status >= 500 ? "server_error"
                         : "invalid_request_error";
}

std::string new_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  std::ostringstream o;
  o << prefix << std::hex << salt << "-" << counter.fetch_add(1);
  return o.str();
}

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool is_tokenizer_path(const std::string& p) {
  return p == "/tokenize" || p == "/detokenize" || p == "/tokenizer_info";
}

json session_json(const SessionInfo& i) {
  return json{{"id", i.id},
              {"object", "session"},
              {"tokens_seen", i.tokens_seen},
              {"turns", i.turns},
              {"tokens_in", i.tokens_in},
              {"tokens_out", i.tokens_out},
              {"busy", i.busy},
              {"resident", i.resident},
              {"shared_sinks", i.shared_sinks},
              {"cache",
               {{"sinks", i.sinks},
                {"window", i.window},
                {"capacity_sinks", i.capacity_sinks},
                {"capacity_window", i.capacity_window},
                {"evicted", i.evicted}}}};
}

}  // namespace

HttpReply json_reply(const json& j) {
  HttpReply r;
  r.body = encode_json(j);
  return r;
}

HttpReply error_reply(const HttpError& e) {
  HttpReply r = json_reply(error_body(e.message, error_type(e.status), e.param));
  r.status = e.status;
  if (e.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_s));
  return r;
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string host_name_of(const std::string& host_header) {
  std::string h = ascii_lower(host_header);
  if (!h.empty() && h[0] == '[') return h.substr(0, h.find(']') == std::string::npos ? h.size() : h.find(']') + 1);
  return h.substr(0, h.find(':'));
}

bool is_loopback_host(const std::string& name) {
  return name == "localhost" || name == "::1" || name == "[::1]" || name.rfind("127.", 0) == 0 ||
         (name.size() > 10 && name.compare(name.size() - 10, 10, ".localhost") == 0);
}

// ---- Generation ----

json Generation::usage() const {
  std::lock_guard<std::mutex> lk(req->mu);
  return json{{"prompt_tokens", req->prompt_tokens},
              {"completion_tokens", req->completion_tokens},
              {"total_tokens", req->prompt_tokens + req->completion_tokens}};
}

HttpReply Generation::refusal() const {
  std::lock_guard<std::mutex> lk(req->mu);
  return error_reply(HttpError{req->error_status ? req->error_status : 500, req->error});
}

std::vector<std::pair<std::string, std::string>> Generation::stream_headers() const {
  std::vector<std::pair<std::string, std::string>> h = {{"Cache-Control", "no-cache"}};
  if (!session_id_.empty()) h.emplace_back("X-Session-Id", session_id_);
  if (replayed_) h.emplace_back("X-Sinkstream-Replayed", "true");
  return h;
}

std::vector<json> chat_deltas(HarmonySplit* harmony, const std::string& text, bool done) {
  std::vector<json> deltas;
  if (!harmony) {
    if (!text.empty()) deltas.push_back(json{{"content", text}});
    return deltas;
  }
  const HarmonySplit::Parts p = harmony->take(text, done);
  if (!p.reasoning.empty()) deltas.push_back(json{{"reasoning_content", p.reasoning}});
  if (!p.content.empty()) deltas.push_back(json{{"content", p.content}});
  return deltas;
}

json chat_message(const std::string& text, bool harmony) {
  if (!harmony) return {{"role", "assistant"}, {"content", text}};
  HarmonySplit split;
  std::vector<json> deltas = chat_deltas(&split, text, true);
  json message = {{"role", "assistant"}, {"content", ""}};
  for (const json& d : deltas) message.update(d);
  return message;
}

std::string Generation::token_text(int32_t id, bool first) const {
  // Control tokens have no text in the answer; as alternatives they are
  // shown by name ("</s>", "<|im_end|>").
  const Vocab& v = tok_->vocab();
  if (id >= 0 && id < v.size() && v.types[static_cast<size_t>(id)] == TokenType::Control)
    return v.pieces[static_cast<size_t>(id)];
  return tok_->answer_bytes(id, first);
}

json Generation::take_logprobs() const {
  std::vector<TokenLogprob> lps;
  {
    std::lock_guard<std::mutex> lk(req->mu);
    lps.swap(req->pending_logprobs);
  }
  auto bytes = [](const std::string& t) {
    json b = json::array();
    for (unsigned char c : t) b.push_back(c);
    return b;
  };
  json content = json::array(), tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array();
  for (const TokenLogprob& lp : lps) {
    // The concatenated tokens are the answer's text: the first with text
    // shows it as the answer does (no SentencePiece word-start space).
    const bool first = !answer_started_;
    if (!tok_->token_bytes(lp.id).empty()) answer_started_ = true;
    const std::string text = token_text(lp.id, first);
    if (chat_) {
      json top = json::array();
      for (const auto& [id, l] : lp.top) {
        const std::string t = token_text(id, first);
        top.push_back({{"token", t}, {"logprob", l}, {"bytes", bytes(t)}});
      }
      content.push_back({{"token", text}, {"logprob", lp.logprob}, {"bytes", bytes(text)}, {"top_logprobs", top}});
      continue;
    }
    tokens.push_back(text);
    if (!lp.scored) {  // a sequence's first token: OpenAI's nulls
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      continue;
    }
    token_logprobs.push_back(lp.logprob);
    json top = json::object();
    for (const auto& [id, l] : lp.top) {
      const std::string t = token_text(id, first);
      if (!top.contains(t)) top[t] = l;  // two ids with one text: the likelier (listed first)
    }
    top_logprobs.push_back(top);
  }
  if (chat_) return {{"content", content}, {"refusal", nullptr}};
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}};
}

json Generation::envelope(const json& content, const json& finish, bool stream_chunk, const json& logprobs) const {
  json choice = {{"index", index_}, {"finish_reason", finish}};
  // Chat: a delta per chunk, a message at the end; completions: text.
  choice[chat_ ? (stream_chunk ? "delta" : "message") : "text"] = content;
  if (logprobs_) choice["logprobs"] = logprobs;
  return {{"id", id_},
          {"object", chat_ ? (stream_chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", json::array({choice})}};
}

std::string Generation::chunk(const json& delta_or_text, const json& finish, bool with_usage,
                              const json& logprobs) const {
  json j = envelope(delta_or_text, finish, true, logprobs);
  if (with_usage) {
    j["usage"] = usage();
    std::lock_guard<std::mutex> lk(req->mu);
    if (!req->persist_error.empty()) j["warning"] = req->persist_error;
  }
  if (!session_id_.empty()) j["session_id"] = session_id_;
  return "data: " + encode_json(j) + "\n\n";
}

std::string Generation::error_events(const std::string& message) {
  return "data: " + encode_json(error_body(message, "server_error")) + "\n\ndata: [DONE]\n\n";
}

std::string Generation::events(const std::string& text, bool done) {
  std::string out;
  if (!sent_role_ && chat_) {
    sent_role_ = true;
    out += chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr, false);
  }
  std::string reason, error;  // once done
  if (done) {
    std::lock_guard<std::mutex> lk(req->mu);
    reason = req->finish_reason;
    error = req->error;
  }
  std::vector<json> pieces;  // this call's deltas (chat) or text (completions)
  if (tools_) {              // the answer goes out whole: a tool call (reason "tool_calls") or content
    held_ += text;
    if (done && reason != "error")
      pieces.push_back(harmony_tools_ ? harmony_tool_reply_fields(held_, reason, true)
                                      : tool_reply_fields(held_, reason, true));
  } else if (chat_) {
    pieces = chat_deltas(harmony_.get(), text, done);
  } else if (std::string shown = std::exchange(echo_text_, "") + text; !shown.empty()) {
    pieces.push_back(std::move(shown));
  }
  // Log-probabilities ride on the last chunk with text, or on the final one;
  // a token whose text is still held back (a possible stop string) may
  // arrive one chunk before its text.
  json lp = nullptr;
  if (logprobs_ && (!pieces.empty() || done)) lp = take_logprobs();
  for (size_t i = 0; i < pieces.size(); ++i)
    out += chunk(pieces[i], nullptr, false, i + 1 == pieces.size() ? lp : json());
  if (done) {
    // Several choices: the Completion ends the stream (usage, [DONE], errors).
    if (reason == "error") return sole_ ? out + error_events(error) : out;
    out += chunk(chat_ ? json::object() : json(""), reason, sole_, pieces.empty() ? lp : json());
    if (sole_) out += "data: [DONE]\n\n";
  }
  return out;
}

json Generation::final_choice(const std::string& text) const {
  std::string reason;
  {
    std::lock_guard<std::mutex> lk(req->mu);
    reason = req->finish_reason;
  }
  if (tools_) {
    json message = {{"role", "assistant"}};
    message.update(harmony_tools_ ? harmony_tool_reply_fields(text, reason, false)
                                  : tool_reply_fields(text, reason, false));
    return envelope(message, reason, false, logprobs_ ? take_logprobs() : json())["choices"][0];
  }
  return envelope(chat_ ? chat_message(text, harmony_ != nullptr) : json(echo_text_ + text), reason, false,
                  logprobs_ ? take_logprobs() : json())["choices"][0];
}

HttpReply Generation::final_reply(const std::string& text) const {
  std::string reason, persist_error;
  {
    std::lock_guard<std::mutex> lk(req->mu);
    reason = req->finish_reason;
    persist_error = req->persist_error;
  }
  if (reason == "error") return refusal();
  json body = envelope(nullptr, nullptr, false);
  body["choices"] = json::array({final_choice(text)});
  body["usage"] = usage();
  if (!session_id_.empty()) body["session_id"] = session_id_;
  HttpReply r;
  if (replayed_) r.headers.emplace_back("X-Sinkstream-Replayed", "true");
  if (!persist_error.empty()) {
    body["warning"] = persist_error;
    r.headers.emplace_back("X-Sinkstream-Warning", persist_error);
  }
  r.body = encode_json(body);
  return r;
}

// ---- Api ----

Api::Api(Scheduler& sched, const ServerOptions& opts)
    : sched_(sched), opts_(opts), gbnf_tokens_(gbnf_tokens(sched.tokenizer())) {
  if (opts_.model_name.empty()) {
    const std::string& src = sched_.model().source;
    opts_.model_name = src.substr(src.find_last_of('/') + 1);
  }
}

HttpRefusal Api::check_headers(const ApiRequest& r) const {
  // A page on another site whose name resolves to 127.0.0.1 (DNS rebinding)
  // sends its own name as Host: a loopback server answers only loopback names.
  if (is_loopback_host(opts_.host)) {
    const std::string host = r.header("Host");
    const std::string name = host_name_of(host);
    if (!host.empty() && !is_loopback_host(name) &&
        std::find(opts_.allowed_hosts.begin(), opts_.allowed_hosts.end(), name) == opts_.allowed_hosts.end())
      return HttpError{403, "Host '" + host + "' is not allowed on a loopback server (see --allowed-host)"};
  }
  const bool protected_path =
      r.path.rfind("/v1/", 0) == 0 || r.path == "/v1" || r.path == "/metrics" || is_tokenizer_path(r.path);
  if (!opts_.api_key.empty() && protected_path &&
      !constant_time_equal(r.header("Authorization"), "Bearer " + opts_.api_key))
    return HttpError{401, "invalid or missing API key"};
  if (r.method == "POST") {
    // A browser form or no-cors fetch cannot send application/json without
    // a CORS preflight, so requiring it stops cross-site request forgery.
    const std::string ct = ascii_lower(r.header("Content-Type"));
    std::string media = ct.substr(0, ct.find(';'));
    while (!media.empty() && media.back() == ' ') media.pop_back();
    if (media != "application/json")
      return HttpError{415, "POST bodies must be JSON (Content-Type: application/json), not '" + ct + "'"};
  }
  return std::nullopt;
}

bool Api::quick(const ApiRequest& r, HttpReply& out) const {
  if (r.method != "GET" && r.method != "HEAD") return false;
  if (r.path == "/") {
    out = HttpReply{200, "text/html; charset=utf-8", kWebPage, {}};
  } else if (r.path == "/health") {
    out = HttpReply{200, "application/json", R"({"status":"ok"})", {}};
  } else if (r.path == "/metrics") {
    out = HttpReply{200, "text/plain; version=0.0.4", render_metrics(sched_.metrics()), {}};
  } else {
    return false;
  }
  return true;
}

Api::Outcome Api::handle(const ApiRequest& r, std::function<void()> on_update) {
  static const std::string kSessions = "/v1/sessions/";
  if (r.method == "GET" && r.path == "/v1/models") {
    return {
        json_reply(json{
            {"object", "list"},
            {"data", {{{"id", opts_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "sinkstream"}}}}}),
        nullptr};
  }
  if (r.method == "GET" && r.path == "/v1/sessions") {
    json arr = json::array();
    for (const auto& i : sched_.sessions()) arr.push_back(session_json(i));
    return {json_reply(json{{"object", "list"}, {"data", arr}}), nullptr};
  }
  if (r.path.rfind(kSessions, 0) == 0 && (r.method == "GET" || r.method == "DELETE")) {
    const std::string id = r.path.substr(kSessions.size());
    if (!valid_session_id(id)) return {error_reply({400, "invalid session id", "session_id"}), nullptr};
    if (opts_.shared_store) sched_.sync_session(id);  // the store's view, not only this replica's
    if (r.method == "GET") {
      auto info = sched_.session(id);
      if (!info) return {error_reply({404, "unknown session '" + id + "'"}), nullptr};
      return {json_reply(session_json(*info)), nullptr};
    }
    if (!sched_.delete_session(id)) return {error_reply({404, "unknown session '" + id + "'"}), nullptr};
    return {json_reply(json{{"id", id}, {"object", "session"}, {"deleted", true}}), nullptr};
  }
  if (r.method == "POST" && r.path == "/tokenize")
    return {tokenize_reply(sched_.tokenizer(), sched_.model(), r.body), nullptr};
  if (r.method == "POST" && r.path == "/detokenize") return {detokenize_reply(sched_.tokenizer(), r.body), nullptr};
  if (r.method == "GET" && r.path == "/tokenizer_info") return {tokenizer_info_reply(sched_.model()), nullptr};
  if (r.method == "POST" && r.path == "/v1/completions") return completion(r, false, std::move(on_update));
  if (r.method == "POST" && r.path == "/v1/chat/completions") return completion(r, true, std::move(on_update));
  const bool known = r.path == "/v1/models" || r.path == "/v1/sessions" || r.path.rfind(kSessions, 0) == 0 ||
                     r.path == "/v1/completions" || r.path == "/v1/chat/completions" || r.path == "/" ||
                     r.path == "/health" || r.path == "/metrics" || is_tokenizer_path(r.path);
  if (known) return {error_reply({405, "method " + r.method + " not allowed on " + r.path}), nullptr};
  return {error_reply({404, "not found"}), nullptr};
}

Api::Outcome Api::completion(const ApiRequest& r, bool chat, std::function<void()> on_update) {
  CompletionRequest cr;
  RequestError perr;
  if (!parse_completion_body(r.body, chat, opts_.max_tokens_limit, cr, perr, &gbnf_tokens_))
    return {error_reply({400, perr.message, perr.param}), nullptr};
  if (!cr.stream && cr.max_tokens < 0 && opts_.default_max_tokens > 0) cr.max_tokens = opts_.default_max_tokens;
  // gpt-oss reasons and names its channel first: a schema or grammar holds
  // its final text; tools are its own commentary calls (harmony_tools.h).
  std::shared_ptr<const ShapePlan> harmony_plan;
  const bool harmony_tools = chat && cr.tool_calls && opts_.chat == ChatFamily::GptOss;
  if (harmony_tools) {
    auto plan = harmony_tool_plan(cr.tools);
    if (!plan.ok()) return {error_reply({400, plan.error().message, "tools"}), nullptr};
    harmony_plan = std::make_shared<const ShapePlan>(std::move(plan.value()));
  } else if (chat && (cr.json_schema || cr.grammar) && opts_.chat == ChatFamily::GptOss) {
    harmony_plan = std::make_shared<const ShapePlan>(harmony_final_plan(cr.json_schema, cr.grammar));
  }
  // Every choice's request takes the body's settings; the first also
  // carries the session (lease, idempotency key).
  auto new_request = [&] {
    auto req = std::make_shared<GenerationRequest>();
    req->sampling = cr.sampling;
    req->max_tokens = cr.max_tokens;
    req->stop = cr.stop;
    req->ignore_eos = cr.ignore_eos;
    req->logprobs = cr.logprobs;
    req->json_schema = cr.json_schema;
    req->grammar = cr.grammar;
    req->shape_plan = harmony_plan;
    return req;
  };
  auto gr = new_request();
  const std::string sid = cr.session_id.empty() ? r.header("X-Session-Id") : cr.session_id;
  if (!sid.empty() && !valid_session_id(sid))
    return {error_reply({400, "session ids are 1-64 characters of [A-Za-z0-9_-]", "session_id"}), nullptr};
  const size_t n_prompts = chat ? 1 : cr.prompts.size();
  if (!sid.empty() && (cr.n > 1 || n_prompts > 1))
    return {error_reply({400, "a session continues one conversation: 'n' > 1 and several prompts take no session",
                         "session_id"}),
            nullptr};
  gr->session_id = sid;
  if (opts_.shared_store && !sid.empty()) {
    // One writer per turn across the fleet, then our copy checked against
    // the store (another replica may have served the last turn).
    auto lease = SessionLease::acquire(sched_.options().state_dir, sid,
                                       {opts_.replica_id, opts_.lease_wait_s, opts_.lease_expire_s});
    if (!lease.ok()) return {error_reply({409, lease.error().message, "session_id", 1}), nullptr};
    gr->lease = std::shared_ptr<SessionLease>(std::move(lease.value()));
    sched_.sync_session(sid);
  }
  const bool first_turn = sid.empty() || !sched_.session_exists(sid);
  const std::string id = new_id(chat ? "chatcmpl-" : "cmpl-");
  const int64_t created = now_s();
  auto completion = std::make_shared<Completion>();
  completion->stream = cr.stream;
  completion->n_per_prompt = cr.n;
  // prompt_text: what echo shows.
  auto add_choice = [&](const std::shared_ptr<GenerationRequest>& req, const std::string& prompt_text) {
    auto g = std::make_shared<Generation>();
    g->req = req;
    g->stream = cr.stream;
    g->chat_ = chat;
    if (chat && opts_.chat == ChatFamily::GptOss) g->harmony_ = std::make_shared<HarmonySplit>();
    g->tools_ = cr.tool_calls;
    g->harmony_tools_ = harmony_tools;
    g->id_ = id;
    g->created_ = created;
    g->model_ = opts_.model_name;
    g->session_id_ = sid;
    g->tok_ = &sched_.tokenizer();
    g->logprobs_ = cr.logprobs >= 0;
    // Entries start with the prompt's when it is scored, else with the answer's.
    g->answer_started_ = req->score_prompt ? !first_turn : !req->answer_starts_text;
    if (cr.echo) g->echo_text_ = prompt_text;
    g->index_ = static_cast<int>(completion->choices.size());
    completion->choices.push_back(g);
    return g;
  };
  // A retried turn whose first attempt was saved (its reply lost with its
  // connection) gets that reply again, not a second turn.
  const std::string key = r.header("Idempotency-Key");
  if (key.size() > kMaxIdempotencyKey)
    return {error_reply({400, "Idempotency-Key is longer than " + std::to_string(kMaxIdempotencyKey) + " bytes"}),
            nullptr};
  if (!sid.empty()) gr->idempotency_key = key;
  if (auto saved = sid.empty() ? std::nullopt : sched_.replay(sid, key)) {
    gr->pending_text = *saved;
    gr->finish_reason = "stop";
    gr->finished = true;
    gr->admitted = true;
    gr->lease.reset();
    add_choice(gr, "")->replayed_ = true;
    return {HttpReply{}, completion};
  }
  const Tokenizer& tok = sched_.tokenizer();
  const auto& vocab = sched_.model().vocab;
  struct Prepared {
    std::vector<int32_t> tokens;
    std::string text;  // the prompt as echo shows it
  };
  std::vector<Prepared> prompts;
  if (chat) {
    std::vector<ChatMessage> msgs = std::move(cr.messages);
    // A session's cache already holds the conversation up to our last
    // reply: only the messages after the last assistant message are new.
    if (!first_turn) {
      size_t last_assistant = msgs.size();
      for (size_t i = 0; i < msgs.size(); ++i)
        if (msgs[i].role == "assistant") last_assistant = i;
      if (last_assistant < msgs.size())
        msgs.erase(msgs.begin(), msgs.begin() + static_cast<std::ptrdiff_t>(last_assistant) + 1);
      if (msgs.empty())
        return {error_reply({400, "no new messages after the last assistant message", "messages"}), nullptr};
    }
    // Tools are described in the system message (a new one first if none)
    // once: a session's later turns find the description in its cache.
    if (first_turn && !cr.tools_text.empty() && !harmony_tools) {
      if (msgs[0].role == "system")
        msgs[0].content += "\n\n" + cr.tools_text;
      else
        msgs.insert(msgs.begin(), ChatMessage{"system", cr.tools_text});
    }
    const std::string text = render_chat_turn(opts_.chat, msgs, first_turn, "", opts_.chat_defaults,
                                              first_turn && harmony_tools ? harmony_tools_namespace(cr.tools) : "");
    const bool add_bos = first_turn && vocab.add_bos && !chat_text_has_bos(opts_.chat);
    prompts.push_back({tok.encode(text, add_bos, opts_.chat != ChatFamily::Plain), ""});
  } else {
    for (const CompletionRequest::Prompt& p : cr.prompts) {
      Prepared& out = prompts.emplace_back();
      if (p.is_ids) {
        out.tokens = p.ids;  // as given: a client that tokenized chose its BOS
        Detokenizer d(tok, first_turn);
        for (int32_t t : p.ids) out.text += d.push(t);
        out.text += d.flush();
      } else {
        // Special-token texts ("<|im_start|>") are those tokens, as in
        // llama.cpp's server and vLLM: hand-templated prompts work.
        out.tokens = tok.encode(p.text, first_turn && vocab.add_bos, /*parse_special=*/true);
        out.text = p.text;
      }
    }
  }
  for (const Prepared& p : prompts)
    if (static_cast<int64_t>(p.tokens.size()) > opts_.max_prompt_tokens)
      return {error_reply({400,
                           "prompt has " + std::to_string(p.tokens.size()) + " tokens; the limit is " +
                               std::to_string(opts_.max_prompt_tokens),
                           chat ? "messages" : "prompt"}),
              nullptr};
  // Choice i * n + j answers prompt i with seed + j (all the same when greedy).
  for (const Prepared& p : prompts) {
    for (int j = 0; j < cr.n; ++j) {
      auto req = completion->choices.empty() ? gr : new_request();
      req->sampling.seed = cr.sampling.seed + static_cast<uint64_t>(j);
      req->tokens = p.tokens;
      if (!chat) {
        req->answer_starts_text = first_turn && p.text.empty();
        req->score_prompt = cr.echo && cr.logprobs >= 0;
      }
      req->on_update = on_update;
      if (auto refused = sched_.submit(req)) {
        completion->cancel();  // the choices already queued
        return {error_reply(*refused), nullptr};
      }
      add_choice(req, p.text);
    }
  }
  for (auto& g : completion->choices) g->sole_ = completion->choices.size() == 1;
  return {HttpReply{}, completion};
}

}  // namespace ss
