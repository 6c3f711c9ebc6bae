#pragma once
// A command's flags, with CLI11 behind a small interface: CLI11 is
// header-only and compiled again in every file that uses it (10 s a file in
// the release build, 18 s under ASan + UBSan), so only flags.cpp and main.cpp
// include it.
#include <cstddef>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace ss::cli {

// One option, its settings chained: flags.add(...).range(1, 256).show_default().
class Opt {
 public:
  explicit Opt(CLI::Option* o) : o_(o) {}
  Opt& show_default();  // the value it holds now, in --help
  Opt& required();
  Opt& expected(int n);  // values per use
  Opt& excludes(const Opt& other);
  // Values in [lo, hi], parsed as the bounds' type (integers: "1.5" is refused).
  Opt& range(int lo, int hi);
  Opt& range(long long lo, long long hi);
  Opt& range(double lo, double hi);
  Opt& positive();      // > 0
  Opt& non_negative();  // >= 0
  Opt& one_of(const std::vector<std::string>& values);

 private:
  CLI::Option* o_;
};

// The flags of one (sub)command.
class Flags {
 public:
  explicit Flags(CLI::App* app = nullptr) : app_(app) {}
  // A subcommand of the program's command line.
  static Flags subcommand(CLI::App& parent, const std::string& name, const std::string& help);
  // An option holding a value of type T (instantiated in flags.cpp for the
  // types the commands use).
  template <class T>
  Opt add(const std::string& names, T& value, const std::string& help = "");
  Opt flag(const std::string& names, bool& value, const std::string& help = "");
  bool parsed() const;                          // this subcommand was given
  size_t count(const std::string& name) const;  // times the option was given
  void footer(const std::string& text);         // text after --help's options

 private:
  CLI::App* app_;
};

}  // namespace ss::cli
