// One writer per session turn across processes: the lock-file lease.
#include "server/session_lease.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "test_paths.h"

namespace ss {
namespace {

struct Dir {
  std::string path = test::temp_path("lease");
  Dir() { std::filesystem::create_directories(path); }
  ~Dir() { std::filesystem::remove_all(path); }
};

std::string host() {
  char h[256] = {0};
  gethostname(h, sizeof h - 1);
  return h;
}

TEST(SessionLease, OneHolderAtATimeAndReleaseOnDestruction) {
  Dir d;
  LeaseOptions o{"a", 0.05, 600};
  auto a = SessionLease::acquire(d.path, "s1", o);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_TRUE(a.value()->held());
  auto b = SessionLease::acquire(d.path, "s1", o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("busy on another replica"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("owner=a"), std::string::npos) << b.error().message;
  EXPECT_TRUE(SessionLease::acquire(d.path, "s2", o).ok());  // other sessions are independent
  a.value().reset();
  EXPECT_FALSE(std::filesystem::exists(d.path + "/s1.lock"));
  EXPECT_TRUE(SessionLease::acquire(d.path, "s1", o).ok());
}

// A replica killed with -9 leaves its lock behind: on the same host a dead
// (or zombie) owner is noticed at once; from another host only after the
// lease time.
TEST(SessionLease, StaleLeasesAreBroken) {
  Dir d;
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  // A zombie first (not yet reaped), then gone.
  for (bool reaped : {false, true}) {
    if (reaped)
      waitpid(child, nullptr, 0);
    else
      usleep(50000);
    std::ofstream(d.path + "/s.lock") << "host=" << host() << " pid=" << child << " owner=dead\n";
    auto l = SessionLease::acquire(d.path, "s", {"me", 0.05, 600});
    ASSERT_TRUE(l.ok()) << (reaped ? "dead: " : "zombie: ") << l.error().message;
    EXPECT_TRUE(l.value()->held());
  }
  // Another host's lease: kept while fresh, broken once older than expire_s.
  const std::string lock = d.path + "/t.lock";
  std::ofstream(lock) << "host=elsewhere-" << host() << " pid=1 owner=far\n";
  EXPECT_FALSE(SessionLease::acquire(d.path, "t", {"me", 0.05, 600}).ok());
  utimbuf old{time(nullptr) - 700, time(nullptr) - 700};
  ASSERT_EQ(utime(lock.c_str(), &old), 0);
  auto l = SessionLease::acquire(d.path, "t", {"me", 0.05, 600});
  EXPECT_TRUE(l.ok());
  // An empty lock (an older build killed between create and write): kept
  // while it may still be being written, broken after a few seconds.
  const std::string empty = d.path + "/e.lock";
  std::ofstream(empty).flush();
  EXPECT_FALSE(SessionLease::acquire(d.path, "e", {"me", 0.05, 600}).ok());
  utimbuf older{time(nullptr) - 10, time(nullptr) - 10};
  ASSERT_EQ(utime(empty.c_str(), &older), 0);
  EXPECT_TRUE(SessionLease::acquire(d.path, "e", {"me", 0.05, 600}).ok());
  // A live owner on this host is never broken.
  std::ofstream(d.path + "/u.lock") << "host=" << host() << " pid=" << getpid() << " owner=alive\n";
  EXPECT_FALSE(SessionLease::acquire(d.path, "u", {"me", 0.05, 600}).ok());
}

// Many contenders: the critical sections never overlap and none is lost.
TEST(SessionLease, ContendersNeverOverlap) {
  Dir d;
  std::atomic<int> inside{0}, max_inside{0};
  std::atomic<int> counter{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        auto l = SessionLease::acquire(d.path, "hot", {"t", 30, 600});
        ASSERT_TRUE(l.ok()) << l.error().message;
        const int now = ++inside;
        int m = max_inside.load();
        while (now > m && !max_inside.compare_exchange_weak(m, now)) {
        }
        counter.fetch_add(1, std::memory_order_relaxed);
        --inside;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(counter, 8 * 40);
  EXPECT_EQ(max_inside.load(), 1);
  // Nothing left behind: no lock, no half-written or broken copies.
  EXPECT_TRUE(std::filesystem::is_empty(d.path));
}

}  // namespace
}  // namespace ss
