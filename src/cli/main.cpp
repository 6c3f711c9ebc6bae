// sinkstream: endless LLM generation with attention sinks.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "ops/kernel_report.h"
#include "util/cpu_features.h"

int main(int argc, char** argv) {
  CLI::App app{"sinkstream — LLM inference with attention sinks (StreamingLLM)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] {
    return ss::cli::version_string() + "\nsystem_info: " + ss::format_kernel_report(ss::kernel_report());
  });
  ss::cli::GenerateCommand generate(app);
  ss::cli::PerplexityCommand perplexity(app);
  ss::cli::AttentionCommand attention(app);
  ss::cli::BenchCommand bench(app);
  ss::cli::ServeCommand serve(app);
  ss::cli::MakeModelCommand make_model(app);
  ss::cli::SystemInfoCommand system_info(app);
  ss::cli::ChatCommand chat(app);
  ss::cli::QuantizeCommand quantize(app);
  ss::cli::ConvertCommand convert(app);
  ss::cli::TokenizeCommand tokenize(app);
  ss::cli::DetokenizeCommand detokenize(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // A mistyped cap must not silently run other kernels than the user asked for.
  if (const std::string err = ss::cpu_cap_error(); !err.empty()) return ss::cli::fail(err);
  if (const std::string err = ss::prefetch_env_error(); !err.empty()) return ss::cli::fail(err);
  if (generate.selected()) return generate.run();
  if (perplexity.selected()) return perplexity.run();
  if (attention.selected()) return attention.run();
  if (bench.selected()) return bench.run();
  if (serve.selected()) return serve.run();
  if (make_model.selected()) return make_model.run();
  if (system_info.selected()) return system_info.run();
  if (chat.selected()) return chat.run();
  if (quantize.selected()) return quantize.run();
  if (convert.selected()) return convert.run();
  if (tokenize.selected()) return tokenize.run();
  if (detokenize.selected()) return detokenize.run();
  return 1;
}
