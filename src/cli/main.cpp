// sinkstream: endless LLM generation with attention sinks.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"sinkstream — LLM inference with attention sinks (StreamingLLM)"};
  app.require_subcommand(1);
  ss::cli::GenerateCommand generate(app);
  ss::cli::PerplexityCommand perplexity(app);
  ss::cli::AttentionCommand attention(app);
  ss::cli::BenchCommand bench(app);
  ss::cli::ServeCommand serve(app);
  ss::cli::MakeModelCommand make_model(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (generate.selected()) return generate.run();
  if (perplexity.selected()) return perplexity.run();
  if (attention.selected()) return attention.run();
  if (bench.selected()) return bench.run();
  if (serve.selected()) return serve.run();
  if (make_model.selected()) return make_model.run();
  return 1;
}
