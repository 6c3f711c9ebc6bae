// chat: one endless conversation with a model, in constant memory under the
// sinks policy. On a terminal: line editing and history (libedit), streamed
// answers, a status line with the cache state. Piped: one user turn per
// input line, each answer on stdout as one block, nothing else there.
#include <editline/readline.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "model/tokenizer.h"
#include "server/chat_template.h"
#include "server/harmony_split.h"
#include "server/session_file.h"
#include "util/atomic_file.h"
#include "util/mapped_file.h"

namespace ss::cli {

namespace {

std::atomic<bool> g_generating{false}, g_stop{false};

// Ctrl-C stops the answer being written; at the prompt it ends the program.
void on_sigint(int) {
  if (!g_generating.load()) _exit(130);
  g_stop.store(true);
}

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class ChatSession {
 public:
  ChatSession(std::shared_ptr<const Model> model, const EngineOptions& eo, const KvPolicy& policy,
              const SamplingParams& sp, ChatFamily family, ChatTemplateDefaults defaults, std::string system,
              ShapeFlags::Loaded shape)
      : model_(std::move(model)),
        engine_(model_, eo),
        policy_(policy),
        tok_(model_->vocab),
        sampling_(sp),
        sampler_(sp),
        family_(family),
        defaults_(std::move(defaults)),
        system_(std::move(system)),
        shape_(std::move(shape)) {
    if (shape_.any()) constraint_vocab_ = ConstraintVocab::of(*model_, tok_);
  }

  Status start() { return reset(); }

  Status reset() {
    if (seq_ >= 0) engine_.free_sequence(seq_);
    SS_ASSIGN_OR_RETURN(seq_, engine_.create_sequence(policy_));
    pending_.clear();
    history_.clear();
    turns_ = tokens_in_ = tokens_out_ = 0;
    return ok_status();
  }

  // One user turn: prefill the rendered turn, then stream the answer to out
  // piece by piece until end of turn, n_predict tokens or Ctrl-C.
  Status turn(const std::string& user, long long n_predict, FILE* out) {
    std::vector<ChatMessage> msgs;
    const bool first = turns_ == 0;
    if (first && !system_.empty()) msgs.push_back({"system", system_});
    msgs.push_back({"user", user});
    const std::string text = render_chat_turn(family_, msgs, first, "", defaults_);
    std::vector<int32_t> toks = pending_;
    const auto enc =
        tok_.encode(text, first && model_->vocab.add_bos && !chat_text_has_bos(family_), /*parse_special=*/true);
    toks.insert(toks.end(), enc.begin(), enc.end());
    pending_.clear();
    const auto t0 = std::chrono::steady_clock::now();
    SS_TRY(feed(toks));
    prefill_tokens_ += static_cast<int64_t>(toks.size());
    prefill_s_ += since(t0);
    tokens_in_ += static_cast<int64_t>(toks.size());
    const auto t1 = std::chrono::steady_clock::now();
    Detokenizer detok(tok_);
    // gpt-oss: its reasoning (analysis channel) is shown dimmed on a
    // terminal and left out of piped output, which holds only answers.
    std::optional<HarmonySplit> harmony;
    if (family_ == ChatFamily::GptOss) harmony.emplace();
    const bool show_reasoning = isatty(fileno(out)) == 1;
    auto show = [&](const std::string& text, bool done) {
      if (!harmony) {
        write_text(text, out);
        return;
      }
      const HarmonySplit::Parts p = harmony->take(text, done);
      if (show_reasoning && !p.reasoning.empty()) write_text("\033[2m" + p.reasoning + "\033[0m", out);
      write_text(p.content, out);
    };
    int64_t n = 0;
    g_stop.store(false);
    g_generating.store(true);
    Status st = ok_status();
    // -j / --grammar: each answer alone has the shape, and ends when it is
    // whole (gpt-oss: its final text, after its reasoning).
    std::optional<Constraint> shape;
    if (shape_.any() && family_ == ChatFamily::GptOss)
      shape.emplace(harmony_final_plan(shape_.schema, shape_.grammar));
    else if (shape_.any())
      shape.emplace(shape_.schema, shape_.grammar);
    while (true) {
      int32_t next = -1;
      if (shape) {
        next = sample_shaped(
            *shape, *constraint_vocab_, logits_[0], masked_, true,
            [&](std::span<const float> l) { return sampler_.sample(l, recent()); },
            [&](int32_t t) { return model_->vocab.is_eog(t); });
        if (next < 0) break;  // nothing may come next: the answer so far is all there is
      } else {
        next = sampler_.sample(logits_[0], recent());
      }
      // Not fed now: the next turn starts with it, so the transcript the
      // cache saw is exactly what was said.
      if (model_->vocab.is_eog(next)) {
        pending_ = {model_->vocab.as_context(next)};
        break;
      }
      show(detok.push(next), false);
      std::fflush(out);
      ++n;
      push_history(next);
      if ((n_predict >= 0 && n >= n_predict) || g_stop.load() || (shape && shape->complete())) {
        pending_ = {next};
        break;
      }
      const int32_t one[1] = {next};
      st = feed(one);
      if (!st.ok()) break;
    }
    g_generating.store(false);
    show(detok.flush(), true);
    decode_tokens_ += n;
    decode_s_ += since(t1);
    last_decode_rate_ = n / std::max(since(t1), 1e-9);
    tokens_out_ += n;
    ++turns_;
    return st;
  }

  std::string status_line() const {
    const SequenceKv* kv = engine_.sequence(seq_);
    const int64_t seen = kv->n_seen(), cached = kv->cached_entries();
    const int64_t sinks = std::min<int64_t>(policy_.sinks, seen);
    char buf[256];
    std::snprintf(buf, sizeof buf, "[sinks %lld | window %lld/%lld | evicted %lld | %.1f tok/s]",
                  static_cast<long long>(sinks), static_cast<long long>(cached - sinks),
                  static_cast<long long>(policy_.bounded() ? policy_.window : cached),
                  static_cast<long long>(seen - cached), last_decode_rate_);
    return buf;
  }

  std::string stats() const {
    const SequenceKv* kv = engine_.sequence(seq_);
    std::ostringstream o;
    o << "policy " << policy_.name() << ", chat template " << chat_family_name(family_) << "\n"
      << "turns " << turns_ << ", tokens in " << tokens_in_ << ", out " << tokens_out_ << ", seen " << kv->n_seen()
      << ", cached " << kv->cached_entries() << ", evicted " << kv->n_seen() - kv->cached_entries() << "\n"
      << "KV in use " << engine_.used_kv_bytes() / 1024 << " KiB (peak " << engine_.peak_kv_bytes() / 1024 << " KiB)\n"
      << "prefill " << prefill_tokens_ << " tok at " << format_rate(prefill_tokens_ / std::max(prefill_s_, 1e-9))
      << " tok/s, decode " << decode_tokens_ << " tok at " << format_rate(decode_tokens_ / std::max(decode_s_, 1e-9))
      << " tok/s\n";
    return o.str();
  }

  // The session file format the server writes (server/session_file.h),
  // replaced whole or not at all (util/atomic_file.h).
  Status save(const std::string& path) const {
    SessionRecord r;
    r.id = "chat";
    r.state = engine_.export_sequence(seq_);
    r.pending = pending_;
    r.turns = turns_;
    r.tokens_in = tokens_in_;
    r.tokens_out = tokens_out_;
    const auto bytes = encode_session(r, fingerprint_of(model_->config));
    return write_file_atomically(path, {reinterpret_cast<const char*>(bytes.data()), bytes.size()}, 0600);
  }

  Status load(const std::string& path) {
    SS_ASSIGN_OR_RETURN(const std::string raw, read_text_file(path));
    const std::vector<uint8_t> bytes(raw.begin(), raw.end());
    SS_ASSIGN_OR_RETURN(SessionRecord r, decode_session(bytes, fingerprint_of(model_->config)));
    for (int32_t t : r.pending)
      if (t < 0 || t >= model_->vocab.size()) return make_error(path + ": pending token outside the vocabulary");
    SS_ASSIGN_OR_RETURN(const SeqId loaded, engine_.import_sequence(r.state));
    if (seq_ >= 0) engine_.free_sequence(seq_);
    seq_ = loaded;
    policy_ = r.state.policy;
    pending_ = r.pending;
    turns_ = r.turns;
    tokens_in_ = r.tokens_in;
    tokens_out_ = r.tokens_out;
    history_.clear();
    return ok_status();
  }

 private:
  Status feed(std::span<const int32_t> toks) {
    const BatchItem item{seq_, toks, false};
    return engine_.forward(std::span<const BatchItem>(&item, 1), logits_);
  }
  void push_history(int32_t t) {
    history_.push_back(t);
    const size_t keep = static_cast<size_t>(std::max(1, sampling_.repeat_last_n));
    if (history_.size() > 2 * keep) history_.erase(history_.begin(), history_.end() - static_cast<long>(keep));
  }
  std::span<const int32_t> recent() const {
    const size_t n = std::min(history_.size(), static_cast<size_t>(std::max(0, sampling_.repeat_last_n)));
    return std::span<const int32_t>(history_).subspan(history_.size() - n);
  }

  std::shared_ptr<const Model> model_;
  Engine engine_;
  KvPolicy policy_;
  Tokenizer tok_;
  SamplingParams sampling_;
  Sampler sampler_;
  ChatFamily family_;
  ChatTemplateDefaults defaults_;
  std::string system_;
  SeqId seq_ = -1;
  std::vector<int32_t> pending_, history_;
  std::vector<std::vector<float>> logits_;
  ShapeFlags::Loaded shape_;
  std::unique_ptr<ConstraintVocab> constraint_vocab_;
  std::vector<float> masked_;
  int64_t turns_ = 0, tokens_in_ = 0, tokens_out_ = 0;
  int64_t prefill_tokens_ = 0, decode_tokens_ = 0;
  double prefill_s_ = 0, decode_s_ = 0, last_decode_rate_ = 0;
};

// A line from the terminal (libedit: editing, history) or from the pipe.
bool read_line(bool tty, std::string& line) {
  if (!tty) return static_cast<bool>(std::getline(std::cin, line));
  char* l = readline("> ");
  if (l == nullptr) return false;
  line = l;
  if (!line.empty()) add_history(l);
  std::free(l);
  return true;
}

const char* kHelp =
    "/reset        start a new conversation\n"
    "/save FILE    save the conversation (its KV cache) to FILE\n"
    "/load FILE    continue a conversation saved with /save (or by the server)\n"
    "/stats        cache, token and speed counters\n"
    "/quit         leave (also Ctrl-D); Ctrl-C stops an answer\n";

}  // namespace

ChatCommand::ChatCommand(CLI::App& app) {
  sub_ = Flags::subcommand(app, "chat",
                           "chat with a model in the terminal, endlessly (sinks policy); piped stdin: one "
                           "user turn per line, answers on stdout");
  model_.add(sub_);
  policy_.add(sub_, false);
  auto sys = sub_.add("-s,--system", system_, "system prompt (it becomes part of the attention sinks' turn)");
  sub_.add("-f,--file", system_file_, "read the system prompt from a file (llama.cpp's -f)").excludes(sys);
  sub_.add("--chat-template", chat_template_,
           std::string("force a template: ") + chat_family_names() + " (default: the model's)");
  sub_.add("-n,--n-predict", n_predict_, "most tokens per answer (-1: until the model ends its turn)").show_default();
  add_sampling_flags(sub_, sampling_, logit_bias_);
  sub_.add("--kv-blocks", kv_blocks_, "KV pool size in blocks (default: what the policy needs)");
  sub_.flag("--no-status", no_status_, "no status line after each answer (terminal only)");
  shape_.add(sub_, "each answer");
  sub_.footer(std::string("Commands:\n") + kHelp);
}

int ChatCommand::run() {
  if (!system_file_.empty()) {
    auto text = read_text_file(system_file_);
    if (!text.ok()) return fail(text.error().message);
    system_ = text.value();
  }
  const bool tty = isatty(STDIN_FILENO) == 1;
  auto model_r = model_.load();
  if (!model_r.ok()) return fail(model_r.error().message);
  const auto model = model_r.value();
  const Tokenizer vocab_tok(model->vocab);
  const GbnfTokens refs = gbnf_tokens(vocab_tok);
  auto shape = shape_.load(&refs);
  if (!shape.ok()) return fail(shape.error().message);
  if (auto st = apply_logit_bias(logit_bias_, model->config.n_vocab, sampling_); !st.ok())
    return fail(st.error().message);
  if (auto st = sampling_.validate(); !st.ok()) return fail(st.error().message);
  auto pols = policy_.resolve(model->config.trained_context);
  if (!pols.ok()) return fail(pols.error().message);
  const StreamMode mode = pols.value()[0];
  if (mode.recompute()) return fail("chat keeps one cache: use a cache policy (sinks, window, dense, h2o)");
  ChatFamily family = detect_chat_family(model->vocab.chat_template);
  if (!chat_template_.empty()) {
    auto f = chat_family_from_name(chat_template_);
    if (!f) return fail("unknown chat template '" + chat_template_ + "' (" + chat_family_names() + ")");
    family = *f;
  }
  auto eo_r = engine_options(model_, policy_, model->config);
  if (!eo_r.ok()) return fail(eo_r.error().message);
  EngineOptions eo = eo_r.value();
  size_kv_pools(eo, model->config, mode.policy, 4 * model->config.trained_context);
  if (kv_blocks_ > 0) eo.kv_blocks = kv_blocks_;
  ChatSession chat(model, eo, mode.policy, sampling_, family, chat_template_defaults(model->vocab.chat_template),
                   system_, shape.value());
  if (auto st = chat.start(); !st.ok()) return fail(st.error().message);
  std::signal(SIGINT, on_sigint);
  if (tty)
    std::fprintf(stderr, "chat: %s, policy %s, template %s. /help for commands, Ctrl-D to leave.\n",
                 model->source.c_str(), mode.policy.name().c_str(), chat_family_name(family));
  std::string line;
  while (read_line(tty, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '/') {
      std::istringstream words(line);
      std::string cmd, arg;
      words >> cmd;
      std::getline(words >> std::ws, arg);
      Status st = ok_status();
      if (cmd == "/quit" || cmd == "/exit") break;
      if (cmd == "/reset") {
        st = chat.reset();
        if (st.ok()) std::fprintf(stderr, "(new conversation)\n");
      } else if (cmd == "/stats") {
        std::fputs(chat.stats().c_str(), stderr);
      } else if (cmd == "/save" || cmd == "/load") {
        if (arg.empty()) {
          st = make_error(cmd + " needs a file name");
        } else {
          st = cmd == "/save" ? chat.save(arg) : chat.load(arg);
          if (st.ok()) std::fprintf(stderr, "(%s %s)\n", cmd == "/save" ? "saved to" : "loaded", arg.c_str());
        }
      } else if (cmd == "/help") {
        std::fputs(kHelp, stderr);
      } else {
        st = make_error("unknown command " + cmd + " (/help lists them)");
      }
      if (!st.ok()) std::fprintf(stderr, "error: %s\n", st.error().message.c_str());
      continue;
    }
    const Status st = chat.turn(line, n_predict_, stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    if (!st.ok()) return fail(st.error().message);
    if (tty && !no_status_) std::fprintf(stderr, "\033[2m%s\033[0m\n", chat.status_line().c_str());
  }
  return 0;
}

}  // namespace ss::cli
