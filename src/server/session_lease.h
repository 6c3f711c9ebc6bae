#pragma once
// One writer per session turn across replicas sharing a state directory: a
// lock file <dir>/<id>.lock, written whole under a private name and then
// hard-linked into place (atomic on local file systems and NFS, and never
// seen empty), holding its owner. A lease whose owner is gone is
// broken: same host and the process no longer exists (a replica killed with
// -9), or older than the lease time (another host that died). Breaking
// renames the lock to a unique name first, so of two replicas breaking the
// same stale lease only one succeeds.
#include <memory>
#include <string>

#include "util/result.h"

namespace ss {

struct LeaseOptions {
  std::string owner;      // the replica's id (in the lock, for people)
  double wait_s = 10;     // how long acquire waits for a busy session
  double expire_s = 600;  // a lease older than this is stale (other hosts)
};

class SessionLease {
 public:
  // The lease, or an error saying who holds it after wait_s.
  static Result<std::unique_ptr<SessionLease>> acquire(const std::string& dir, const std::string& id,
                                                       const LeaseOptions& opts);
  ~SessionLease();  // releases (removes the lock if it is still ours)
  SessionLease(const SessionLease&) = delete;
  SessionLease& operator=(const SessionLease&) = delete;
  // Whether the lock file still names us (nobody broke the lease).
  bool held() const;
  const std::string& path() const { return path_; }

 private:
  SessionLease(std::string path, std::string content) : path_(std::move(path)), content_(std::move(content)) {}
  std::string path_, content_;
};

}  // namespace ss
