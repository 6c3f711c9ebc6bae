// AtomicFile: the destination is its old content or the whole new one, never
// a part; temporaries never outlive a write that ended, and two writers never
// share one.
#include "util/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_paths.h"

namespace ss {
namespace {

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

Status write_text(const std::string& path, const std::string& text, mode_t mode = 0666) {
  auto f = AtomicFile::create(path, mode);
  if (!f.ok()) return f.error();
  SS_TRY(f->write(text.data(), text.size()));
  return f->commit();
}

TEST(AtomicFile, CommitReplacesTheFileWholeWithTheAskedMode) {
  const test::TempPath path("atomic_commit");
  put(path.path, "old");
  auto f = AtomicFile::create(path.path, 0600);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_NE(f->temporary(), path.path);
  ASSERT_TRUE(f->write("new ", 4).ok());
  ASSERT_TRUE(f->write("text", 4).ok());
  EXPECT_EQ(test::read_file(path.path), "old");  // nothing shows before the commit
  ASSERT_TRUE(f->commit().ok());
  EXPECT_EQ(test::read_file(path.path), "new text");
  struct stat st {};
  ASSERT_EQ(stat(path.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(test::partial_files_of(path.path).empty());
  EXPECT_FALSE(f->commit().ok());  // once only
}

TEST(AtomicFile, AbandonedWriteLeavesTheOldFileAndNoTemporary) {
  const test::TempPath path("atomic_abandon");
  put(path.path, "old");
  {
    auto f = AtomicFile::create(path.path);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->write("half", 4).ok());
    EXPECT_EQ(test::partial_files_of(path.path).size(), 1u);
  }
  EXPECT_EQ(test::read_file(path.path), "old");
  EXPECT_TRUE(test::partial_files_of(path.path).empty());
}

TEST(AtomicFile, TwoWritersAtOnceNeverShareATemporaryAndTheLastCommitWins) {
  const test::TempPath path("atomic_two");
  auto a = AtomicFile::create(path.path);
  auto b = AtomicFile::create(path.path);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->temporary(), b->temporary());
  const std::string long_text(100000, 'a'), short_text = "b";
  ASSERT_TRUE(a->write(long_text.data(), long_text.size()).ok());
  ASSERT_TRUE(b->write(short_text.data(), short_text.size()).ok());
  ASSERT_TRUE(b->commit().ok());
  EXPECT_EQ(test::read_file(path.path), short_text);
  ASSERT_TRUE(a->commit().ok());
  EXPECT_EQ(test::read_file(path.path), long_text);
  EXPECT_TRUE(test::partial_files_of(path.path).empty());
}

TEST(AtomicFile, AFailedWriteIsReportedAndLeavesTheOldFile) {
  // No file may grow past 4 KiB: as on a full disk.
  const test::TempPath path("atomic_full");
  put(path.path, "old");
  Status st = ok_status();
  {
    const test::FileSizeLimit limit(4096);
    st = write_text(path.path, std::string(1 << 20, 'x'));
  }
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(".part."), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find(std::strerror(EFBIG)), std::string::npos) << st.error().message;
  EXPECT_EQ(test::read_file(path.path), "old");
  EXPECT_TRUE(test::partial_files_of(path.path).empty());
}

TEST(AtomicFile, ALinkKeepsPointingAtTheReplacedFile) {
  const test::TempPath dir("atomic_link");
  std::filesystem::create_directories(dir.path);
  const std::string target = dir.path + "/model", link = dir.path + "/current";
  put(target, "old");
  std::filesystem::create_symlink(target, link);
  ASSERT_TRUE(write_text(link, "new").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(test::read_file(target), "new");
  EXPECT_TRUE(test::partial_files_of(target).empty());
  EXPECT_TRUE(test::partial_files_of(link).empty());
}

TEST(AtomicFile, ADanglingLinkGetsItsTargetCreatedAndStaysALink) {
  const test::TempPath dir("atomic_dangling");
  std::filesystem::create_directories(dir.path + "/store");
  // A relative chain: first -> second -> store/model (missing).
  std::filesystem::create_symlink("store/model", dir.path + "/second");
  std::filesystem::create_symlink("second", dir.path + "/first");
  ASSERT_TRUE(write_text(dir.path + "/first", "new").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(dir.path + "/first"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir.path + "/second"));
  EXPECT_EQ(test::read_file(dir.path + "/store/model"), "new");
  EXPECT_TRUE(test::partial_files_of(dir.path + "/store/model").empty());
}

// "..": taken where a linked folder really leads, not cut lexically.
TEST(AtomicFile, ADanglingLinkThroughALinkedFolderResolvesDotDotPhysically) {
  const test::TempPath dir("atomic_dotdot");
  std::filesystem::create_directories(dir.path + "/real/sub");
  std::filesystem::create_symlink("real/sub", dir.path + "/alias");  // alias/.. is real, not dir
  std::filesystem::create_symlink("../target", dir.path + "/real/sub/link");
  ASSERT_TRUE(write_text(dir.path + "/alias/link", "new").ok());
  EXPECT_EQ(test::read_file(dir.path + "/real/target"), "new");
  EXPECT_FALSE(std::filesystem::exists(dir.path + "/target"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir.path + "/real/sub/link"));
}

TEST(AtomicFile, ALinkLoopIsAClearError) {
  const test::TempPath dir("atomic_loop");
  std::filesystem::create_directories(dir.path);
  std::filesystem::create_symlink("b", dir.path + "/a");
  std::filesystem::create_symlink("a", dir.path + "/b");
  const Status st = write_text(dir.path + "/a", "x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("too many levels of symbolic links"), std::string::npos) << st.error().message;
  EXPECT_TRUE(std::filesystem::is_symlink(dir.path + "/a"));
}

TEST(AtomicFile, ADeviceIsWrittenInPlace) {
  ASSERT_TRUE(write_text("/dev/null", "anything").ok());
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(AtomicFile, AMissingFolderIsAClearError) {
  const test::TempPath dir("atomic_missing");
  const Status st = write_text(dir.path + "/no/such/file", "x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("cannot create"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace ss
