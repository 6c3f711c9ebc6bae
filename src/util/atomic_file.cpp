#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace ss {

namespace {
std::string errno_text() { return std::strerror(errno); }

// The folder a rename in it must be made durable in.
std::string folder_of(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Where writing through `path` lands: the last link's target, followed
// link by link so that a dangling link names the file to create (as a
// shell's `>` does) rather than being replaced by one.
Result<std::string> follow_links(const std::string& path) {
  namespace fs = std::filesystem;
  constexpr int kMaxHops = 40;  // the kernel's own ELOOP limit
  fs::path at = path;
  for (int hop = 0; hop <= kMaxHops; ++hop) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(at, ec))) return at.string();
    const fs::path target = fs::read_symlink(at, ec);
    if (ec) return make_error(at.string() + ": cannot read link: " + ec.message());
    // Not normalized: "dir/../x" must resolve ".." where "dir" really
    // leads, as the kernel does, when dir is itself a link.
    at = target.is_absolute() ? target : at.parent_path() / target;
  }
  return make_error(path + ": too many levels of symbolic links");
}
}  // namespace

Result<AtomicFile> AtomicFile::create(const std::string& path, mode_t mode) {
  std::error_code ec;
  SS_ASSIGN_OR_RETURN(const std::string dest, follow_links(path));
  const auto st = std::filesystem::status(dest, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    std::FILE* f = std::fopen(dest.c_str(), "wb");
    if (!f) return make_error(dest + ": cannot open for writing: " + errno_text());
    return AtomicFile(dest, dest, f, true);
  }
  static std::atomic<unsigned> counter{0};
  const std::string temp = dest + ".part." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  // O_EXCL: a name another writer holds is never truncated under it.
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return make_error(temp + ": cannot create: " + errno_text());
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    ::unlink(temp.c_str());
    return make_error(temp + ": cannot open: " + errno_text());
  }
  return AtomicFile(dest, temp, f, false);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : dest_(std::move(other.dest_)),
      temp_(std::move(other.temp_)),
      f_(std::exchange(other.f_, nullptr)),
      in_place_(other.in_place_),
      error_(std::move(other.error_)) {}

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::abandon() {
  if (!f_) return;
  std::fclose(f_);
  f_ = nullptr;
  if (!in_place_) ::unlink(temp_.c_str());
}

Status AtomicFile::write(const void* data, size_t bytes) {
  if (!f_) return make_error(temp_ + ": already closed");
  if (error_.empty() && bytes > 0 && std::fwrite(data, 1, bytes, f_) != bytes) error_ = errno_text();
  if (!error_.empty()) return make_error(temp_ + ": write failed: " + error_);
  return ok_status();
}

Status AtomicFile::commit() {
  if (!f_) return make_error(temp_ + ": already closed");
  if (error_.empty() && std::fflush(f_) != 0) error_ = errno_text();
  if (!error_.empty()) {
    abandon();
    return make_error(temp_ + ": write failed: " + error_);
  }
  // A pipe or terminal cannot be synced (EINVAL): only real files must be.
  if (!in_place_ && ::fsync(::fileno(f_)) != 0) {
    const std::string why = errno_text();
    abandon();
    return make_error(temp_ + ": fsync failed: " + why);
  }
  const int closed = std::fclose(f_);
  f_ = nullptr;
  if (closed != 0) {
    const std::string why = errno_text();
    if (!in_place_) ::unlink(temp_.c_str());
    return make_error(temp_ + ": write failed: " + why);
  }
  if (in_place_) return ok_status();
  if (::rename(temp_.c_str(), dest_.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(temp_.c_str());
    return make_error(dest_ + ": cannot rename from " + temp_ + ": " + why);
  }
  // The rename itself is durable only once its folder is.
  const int dfd = ::open(folder_of(dest_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return ok_status();
}

Status write_file_atomically(const std::string& path, std::string_view bytes, mode_t mode) {
  SS_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path, mode));
  SS_TRY(f.write(bytes.data(), bytes.size()));
  return f.commit();
}

}  // namespace ss
