#pragma once
#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/shape_flags.h"
#include "sample/sampler.h"

namespace ss::cli {

class GenerateCommand {
 public:
  explicit GenerateCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  ModelFlags model_;
  PolicyFlags policy_;
  SamplingParams sampling_;
  std::vector<std::string> logit_bias_;  // -l specs, applied once the vocabulary is known
  std::string prompt_, prompt_file_;
  ShapeFlags shape_;  // -j / --grammar
  long long n_new_ = -1;
  bool ids_ = false;
  bool ignore_eos_ = false;
  int kv_blocks_ = 0;
};

class PerplexityCommand {
 public:
  explicit PerplexityCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  ModelFlags model_;
  PolicyFlags policy_;
  std::string text_file_;
  std::string tokens_file_;
  std::string nll_out_;
  std::string csv_;
  std::string plot_;
  long long limit_ = 0;
  long long segment_ = 1000;
  bool raw_ = false;
};

class AttentionCommand {
 public:
  explicit AttentionCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  ModelFlags model_;
  PolicyFlags policy_;
  std::string prompt_, file_, svg_, svg_map_, kept_;
  bool raw_ = false;
  long long limit_ = 512;
  int kept_columns_ = 128;
  long long first_k_ = 1;
  double flag_ratio_ = 4.0;
  int map_layer_ = 0, map_head_ = 0;
  long long map_queries_ = 64;
};

class BenchCommand {
 public:
  explicit BenchCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  ModelFlags model_;
  PolicyFlags policy_;
  std::string prefill_ = "64,256,1024";
  std::string positions_ = "1000,10000,100000,1000000";
  std::string compare_;
  std::string pair_;
  std::string kv_types_;
  std::string batch_;
  int batch_context_ = 64;
  bool bandwidth_ = false;
  bool host_floor_ = false;
  int samples_ = 256;
  uint64_t seed_ = 1;
  bool json_ = false;
};

class MakeModelCommand {
 public:
  explicit MakeModelCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  std::string shape_;
  std::string type_ = "q4_0";
  uint64_t seed_ = 1;
  int layers_ = 0;
  int vocab_ = 0;
  std::string expert_type_ = "mxfp4";
  std::string output_;
};

class SystemInfoCommand {
 public:
  explicit SystemInfoCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  bool json_ = false;
};

class ServeCommand {
 public:
  explicit ServeCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  ModelFlags model_;
  PolicyFlags policy_;
  std::string host_ = "127.0.0.1";
  int port_ = 8080;
  std::string api_key_, state_dir_, spill_dir_, chat_template_, replica_id_;
  bool shared_state_ = false;
  double lease_wait_ = 10;
  std::vector<std::string> allowed_hosts_;
  int max_sessions_ = 100000, max_batch_ = 64, max_queue_ = 256, kv_blocks_ = 0, max_connections_ = 4096;
  double header_timeout_ = 10, idle_timeout_ = 120, drain_ = 10;
  size_t max_body_ = 1 << 20;
  long long max_prompt_tokens_ = 1 << 16, max_tokens_limit_ = 0, default_max_tokens_ = 4096;
};

// chat: an endless multi-turn conversation in the terminal (or one turn per
// line of piped stdin).
class ChatCommand {
 public:
  explicit ChatCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  ModelFlags model_;
  PolicyFlags policy_;
  SamplingParams sampling_;
  std::vector<std::string> logit_bias_;  // -l specs, applied once the vocabulary is known
  std::string system_, system_file_, chat_template_;
  ShapeFlags shape_;  // -j / --grammar: each answer's shape
  long long n_predict_ = 512;
  int kv_blocks_ = 0;
  bool no_status_ = false;
};

// quantize IN OUT TYPE: llama.cpp's types and mixes with ggml's scales.
class QuantizeCommand {
 public:
  explicit QuantizeCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  std::string in_, out_, type_;
  int threads_ = 0;
  bool pure_ = false, allow_requantize_ = false;
};

// convert HFDIR OUT.gguf: safetensors + tokenizer + chat template -> GGUF.
class ConvertCommand {
 public:
  explicit ConvertCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  std::string in_, out_, outtype_ = "auto", chat_template_;
  int threads_ = 0;
};

// tokenize / detokenize: how text maps to ids, as llama-tokenize shows it.
class TokenizeCommand {
 public:
  explicit TokenizeCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  std::string model_, tokenizer_, prompt_, file_;
  bool ids_ = false, count_ = false, no_bos_ = false, no_parse_special_ = false, stdin_ = false;
};

class DetokenizeCommand {
 public:
  explicit DetokenizeCommand(CLI::App& app);
  bool selected() const { return sub_.parsed(); }
  int run();

 private:
  Flags sub_;
  std::string model_, tokenizer_;
  std::vector<std::string> ids_;
};

}  // namespace ss::cli
