#pragma once
// Fuzz inputs become real files (in a private temp dir, tmpfs where there is
// one) so the loaders run exactly as they do on a downloaded model: open,
// mmap, parse. split() cuts one input into several files.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ss::fuzz {

inline const std::string& temp_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (base ? base : "/tmp")) + "/ssfuzz-XXXXXX";
    if (!mkdtemp(tmpl.data())) std::abort();
    return tmpl;
  }();
  // Removed at exit, so replays in every test run leave nothing behind.
  static const bool cleanup = [] { return std::atexit([] { std::filesystem::remove_all(temp_dir()); }) == 0; }();
  (void)cleanup;
  return dir;
}

inline std::string write_file(const std::string& name, std::string_view bytes) {
  const std::string path = temp_dir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {  // the dir was removed under us (a tmp cleaner): make it again once
    std::filesystem::create_directories(temp_dir());
    f = std::fopen(path.c_str(), "wb");
  }
  if (!f) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
  return path;
}

// Splits the input at the first occurrences of `sep` into n parts (missing
// parts are empty), so one fuzz input can carry a config and a weights file.
inline std::vector<std::string_view> split(const uint8_t* data, size_t size, size_t n) {
  static constexpr std::string_view sep = "\n--8<--\n";
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < n) {
    const size_t at = rest.find(sep);
    if (at == std::string_view::npos) break;
    parts.push_back(rest.substr(0, at));
    rest.remove_prefix(at + sep.size());
  }
  parts.push_back(rest);
  while (parts.size() < n) parts.push_back({});
  return parts;
}

}  // namespace ss::fuzz
