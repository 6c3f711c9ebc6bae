#pragma once
// A file replaced whole or not at all: written to a temporary beside its
// destination, flushed to the disk, then renamed over it. A write cut short
// (a full disk, Ctrl-C, kill -9, a power cut) leaves the old file as it was,
// never a truncated one; two writers of one destination never share a
// temporary, so the last to commit wins with a whole file.
#include <sys/types.h>

#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "util/result.h"

namespace ss {

class AtomicFile {
 public:
  // Opens PATH.part.PID.N (N counts this process's files) with `mode` (less
  // the umask). A symbolic link's file is the destination (the link stays;
  // a dangling link's missing target is created, as a shell's `>` does);
  // what exists and is not a regular file (/dev/null, a pipe, a terminal)
  // is written in place.
  static Result<AtomicFile> create(const std::string& path, mode_t mode = 0666);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  // Removes the temporary unless committed.
  ~AtomicFile();

  // Buffered; the first failure sticks and commit() reports it.
  Status write(const void* data, size_t bytes);
  Status write(std::span<const uint8_t> bytes) { return write(bytes.data(), bytes.size()); }

  // Flushes and fsyncs the temporary, renames it over the destination and
  // fsyncs the directory, so the new file survives a power cut once this
  // returns. On failure the temporary is removed and the destination is
  // untouched.
  Status commit();

  const std::string& destination() const { return dest_; }
  const std::string& temporary() const { return temp_; }  // == destination() when written in place

 private:
  AtomicFile(std::string dest, std::string temp, std::FILE* f, bool in_place)
      : dest_(std::move(dest)), temp_(std::move(temp)), f_(f), in_place_(in_place) {}
  void abandon();

  std::string dest_, temp_;
  std::FILE* f_ = nullptr;
  bool in_place_ = false;
  std::string error_;  // the first write error, as the system told it
};

// The whole of `bytes` as the file at `path`, through an AtomicFile.
Status write_file_atomically(const std::string& path, std::string_view bytes, mode_t mode = 0666);

}  // namespace ss
