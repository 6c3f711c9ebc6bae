#pragma once
// Where tests find ../shared (models, golden data): $SINKSTREAM_SHARED or the
// directory beside the repository.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ss::test {

inline std::string shared_dir() {
  if (const char* e = std::getenv("SINKSTREAM_SHARED"); e && *e) return e;
  return SS_SHARED_DEFAULT;
}
inline std::string shared(const std::string& rel) { return shared_dir() + "/" + rel; }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One value per line; lines starting with '#' (the golden files' header) are skipped.
template <typename T>
inline std::vector<T> read_values(const std::string& path) {
  std::ifstream in(path);
  std::vector<T> v;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') v.push_back(static_cast<T>(std::stod(line)));
  return v;
}
inline std::vector<int32_t> read_ids(const std::string& path) { return read_values<int32_t>(path); }
inline std::vector<double> read_nll(const std::string& path) { return read_values<double>(path); }

inline std::string rtrim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  return s;
}

inline std::string temp_path(const std::string& name) {
  const char* t = std::getenv("TMPDIR");
  return std::string(t && *t ? t : "/tmp") + "/sinkstream_test_" + std::to_string(::getpid()) + "_" + name;
}

// The temporaries util/atomic_file.h leaves beside `path` when a write is
// cut short (PATH.part.PID.N): none once a write is done or has failed.
inline std::vector<std::string> partial_files_of(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = p.filename().string() + ".part.";
  std::vector<std::string> found;
  std::error_code ec;
  const auto folder = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  for (const auto& e : std::filesystem::directory_iterator(folder, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path().string());
  return found;
}

// While in scope, no file this process writes may grow past `bytes`: a
// write past it fails with EFBIG, as on a full disk with ENOSPC (SIGXFSZ,
// which would end the process, ignored meanwhile). Restored on the way out,
// also when a fatal assertion returns early.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit small = old_;
    small.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &small);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

// A temp_path that is removed (file or tree) when the test leaves its scope,
// also when a fatal assertion returns early, so failed runs leave no litter.
struct TempPath {
  explicit TempPath(const std::string& name) : path(temp_path(name)) {}
  ~TempPath() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::string path;
};

}  // namespace ss::test
