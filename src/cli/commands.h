#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "cli/common.h"
#include "sample/sampler.h"

namespace ss::cli {

class GenerateCommand {
 public:
  explicit GenerateCommand(CLI::App& app);
  bool selected() const { return sub_->parsed(); }
  int run();

 private:
  CLI::App* sub_;
  ModelFlags model_;
  PolicyFlags policy_;
  SamplingParams sampling_;
  std::string prompt_;
  long long n_new_ = -1;
  bool ids_ = false;
  bool ignore_eos_ = false;
  int kv_blocks_ = 0;
};

class PerplexityCommand {
 public:
  explicit PerplexityCommand(CLI::App& app);
  bool selected() const { return sub_->parsed(); }
  int run();

 private:
  CLI::App* sub_;
  ModelFlags model_;
  PolicyFlags policy_;
  std::string text_file_;
  std::string tokens_file_;
  std::string nll_out_;
  long long limit_ = 0;
  bool raw_ = false;
};

}  // namespace ss::cli
