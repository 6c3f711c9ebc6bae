#include "server/session_lease.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

namespace ss {

namespace {

std::string host_name() {
  char h[256] = {0};
  if (gethostname(h, sizeof h - 1) != 0) return "unknown";
  return h;
}

std::string read_small(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// A killed process whose parent has not reaped it yet is a zombie: kill(0)
// still finds it, /proc says Z.
bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  const std::string stat = read_small("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

uint64_t next_nonce() {
  static std::atomic<uint64_t> n{0};
  return ++n;
}

// "host=H pid=P owner=O lease=N\n": stale when H is this host and P is
// gone, or when the file is older than expire_s. An empty lock comes only
// from an older build killed between create and write: stale after a grace.
bool stale(const std::string& path, const std::string& content, double expire_s) {
  if (content.empty()) expire_s = std::min(expire_s, 5.0);
  const std::string me = "host=" + host_name() + " ";
  if (content.rfind(me, 0) == 0) {
    const long pid = std::strtol(content.c_str() + me.size() + 4, nullptr, 10);  // after "pid="
    if (pid > 0 && !process_alive(static_cast<pid_t>(pid))) return true;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;  // gone: the next try creates it
  const double age = static_cast<double>(::time(nullptr) - st.st_mtime);
  return age > expire_s;
}

}  // namespace

Result<std::unique_ptr<SessionLease>> SessionLease::acquire(const std::string& dir, const std::string& id,
                                                            const LeaseOptions& opts) {
  const std::string path = dir + "/" + id + ".lock";
  // The nonce tells two leases of one process apart (held() after a break).
  const std::string content = "host=" + host_name() + " pid=" + std::to_string(::getpid()) + " owner=" + opts.owner +
                              " lease=" + std::to_string(next_nonce()) + "\n";
  // Written whole under a private name, then linked into place at each
  // try: the lock is never seen empty (a replica killed between create and
  // write would otherwise leave a lock no one can attribute, so never break).
  const std::string tmp = path + ".new." + std::to_string(::getpid()) + "." + std::to_string(next_nonce());
  {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return make_error(tmp + ": " + std::strerror(errno));
    const bool written = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
    ::close(fd);
    if (!written) {
      ::unlink(tmp.c_str());
      return make_error(path + ": cannot write the lease");
    }
  }
  struct Unlink {
    const std::string& p;
    ~Unlink() { ::unlink(p.c_str()); }
  } drop_tmp{tmp};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(opts.wait_s);
  std::string holder;
  for (int attempt = 0;; ++attempt) {
    if (::link(tmp.c_str(), path.c_str()) == 0) return std::unique_ptr<SessionLease>(new SessionLease(path, content));
    if (errno != EEXIST) return make_error(path + ": " + std::strerror(errno));
    holder = read_small(path);
    if (stale(path, holder, opts.expire_s)) {
      // Only the replica whose rename succeeds removes it.
      const std::string broken = path + ".broken." + std::to_string(::getpid()) + "." + std::to_string(next_nonce());
      if (::rename(path.c_str(), broken.c_str()) == 0) {
        if (read_small(broken) == holder) {
          ::unlink(broken.c_str());
          std::fprintf(stderr, "[sinkstream] session %s: broke a stale lease (%s)\n", id.c_str(),
                       holder.substr(0, holder.size() - 1).c_str());
        } else {  // a fresh lease slipped in between: put it back unless yet another exists
          (void)::link(broken.c_str(), path.c_str());
          ::unlink(broken.c_str());
        }
      }
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(attempt < 10 ? 5 : 25));
  }
  while (!holder.empty() && holder.back() == '\n') holder.pop_back();
  return make_error("session '" + id + "' is busy on another replica (" + holder + ")");
}

bool SessionLease::held() const { return read_small(path_) == content_; }

SessionLease::~SessionLease() {
  if (held()) ::unlink(path_.c_str());
}

}  // namespace ss
