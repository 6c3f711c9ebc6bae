#include "cli/flags.h"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>

namespace ss::cli {

Opt& Opt::show_default() {
  o_->capture_default_str();
  return *this;
}
Opt& Opt::required() {
  o_->required();
  return *this;
}
Opt& Opt::expected(int n) {
  o_->expected(n);
  return *this;
}
Opt& Opt::excludes(const Opt& other) {
  o_->excludes(other.o_);
  return *this;
}
Opt& Opt::range(int lo, int hi) { return range(static_cast<long long>(lo), static_cast<long long>(hi)); }
Opt& Opt::range(long long lo, long long hi) {
  o_->check(CLI::Range(lo, hi));
  return *this;
}
Opt& Opt::range(double lo, double hi) {
  o_->check(CLI::Range(lo, hi));
  return *this;
}
Opt& Opt::positive() {
  o_->check(CLI::PositiveNumber);
  return *this;
}
Opt& Opt::non_negative() {
  o_->check(CLI::NonNegativeNumber);
  return *this;
}
Opt& Opt::one_of(const std::vector<std::string>& values) {
  o_->check(CLI::IsMember(values));
  return *this;
}

Flags Flags::subcommand(CLI::App& parent, const std::string& name, const std::string& help) {
  return Flags(parent.add_subcommand(name, help));
}

template <class T>
Opt Flags::add(const std::string& names, T& value, const std::string& help) {
  return Opt(app_->add_option(names, value, help));
}
template Opt Flags::add(const std::string&, std::string&, const std::string&);
template Opt Flags::add(const std::string&, int&, const std::string&);
template Opt Flags::add(const std::string&, long long&, const std::string&);
template Opt Flags::add(const std::string&, unsigned long&, const std::string&);
template Opt Flags::add(const std::string&, float&, const std::string&);
template Opt Flags::add(const std::string&, double&, const std::string&);
template Opt Flags::add(const std::string&, std::vector<std::string>&, const std::string&);
template Opt Flags::add(const std::string&, std::optional<float>&, const std::string&);

Opt Flags::flag(const std::string& names, bool& value, const std::string& help) {
  return Opt(app_->add_flag(names, value, help));
}
bool Flags::parsed() const { return app_->parsed(); }
size_t Flags::count(const std::string& name) const { return app_->count(name); }
void Flags::footer(const std::string& text) { app_->footer(text); }

}  // namespace ss::cli
