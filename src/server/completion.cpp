// Completion: the choices of one request, driven together (server/api.h).
#include <nlohmann/json.hpp>

#include "server/api.h"
#include "server/json_text.h"

namespace ss {

using nlohmann::json;

namespace {

struct State {
  bool admitted = false, finished = false;
  std::string reason;
};

State state_of(GenerationRequest& r) {
  std::lock_guard<std::mutex> lk(r.mu);
  return {r.admitted, r.finished, r.finish_reason};
}

}  // namespace

std::optional<HttpReply> Completion::refused() const {
  for (const auto& g : choices) {
    const State s = state_of(*g->req);
    if (s.finished && (!s.admitted || s.reason == "error")) return g->refusal();
  }
  return std::nullopt;
}

bool Completion::all_admitted() const {
  for (const auto& g : choices)
    if (!state_of(*g->req).admitted) return false;
  return true;
}

void Completion::cancel() {
  for (const auto& g : choices) g->req->cancelled = true;
}

json Completion::usage() const {
  // A prompt counts once however many choices answer it (its first choice
  // carries it); every choice's answer counts.
  int64_t prompt = 0, completion = 0;
  for (const auto& g : choices) {
    std::lock_guard<std::mutex> lk(g->req->mu);
    if (g->index_ % n_per_prompt == 0) prompt += g->req->prompt_tokens;
    completion += g->req->completion_tokens;
  }
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

std::string Completion::events(bool& done) {
  done = false;
  if (choices.size() == 1) {
    GenerationRequest& r = *choices[0]->req;
    const std::string text = r.poll(done);
    return choices[0]->events(text, done);
  }
  finished_.resize(choices.size(), false);
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (finished_[i]) continue;
    bool fin = false;
    const std::string text = choices[i]->req->poll(fin);
    out += choices[i]->events(text, fin);
    if (!fin) continue;
    finished_[i] = true;
    const State s = state_of(*choices[i]->req);
    if (s.reason == "error") {  // one choice failed: the stream ends with its error
      std::string error;
      {
        std::lock_guard<std::mutex> lk(choices[i]->req->mu);
        error = choices[i]->req->error;
      }
      cancel();
      done = true;
      return out + Generation::error_events(error);
    }
  }
  if (std::find(finished_.begin(), finished_.end(), false) != finished_.end()) return out;
  json last = choices[0]->envelope(nullptr, nullptr, /*stream_chunk=*/true);
  last["choices"] = json::array();
  last["usage"] = usage();
  done = true;
  return out + "data: " + encode_json(last) + "\n\ndata: [DONE]\n\n";
}

std::optional<HttpReply> Completion::poll_final() {
  texts_.resize(choices.size());
  finished_.resize(choices.size(), false);
  bool all = true;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (finished_[i]) continue;
    bool fin = false;
    texts_[i] += choices[i]->req->poll(fin);
    finished_[i] = fin;
    all = all && fin;
  }
  if (!all) return std::nullopt;
  if (choices.size() == 1) return choices[0]->final_reply(texts_[0]);
  if (auto r = refused()) return r;
  json body = choices[0]->envelope(nullptr, nullptr, /*stream_chunk=*/false);
  body["choices"] = json::array();
  for (size_t i = 0; i < choices.size(); ++i) body["choices"].push_back(choices[i]->final_choice(texts_[i]));
  body["usage"] = usage();
  return json_reply(body);
}

}  // namespace ss
