// FileChangeWatch: whether a file may have changed since it was last looked
// at, told by a counter that moves on every change, at the cost of one
// non-blocking read of an inotify descriptor that watches the file's folder.
//
// A server that must honour a change of a file on its very next call (the
// API key file, auth/key_store.h) used to stat() it on every call, a path
// walk that took about 7% of a keyed digits-mlp query's server time. The
// kernel queues an inotify event within the writer's own call (its write,
// its rename over the file), so a change made before a call starts is in
// the queue when that call reads it: the answer is as current as a stat's.
//
// Contract:
//   * Generation() is a counter that grows whenever an event about the file
//     (or a lost event: the queue overflowed) was queued since the last
//     call; equal answers mean no change in between. -1: it cannot tell
//     (the folder does not exist yet, inotify is unavailable or its limits
//     are reached, the folder was removed or moved): the caller looks at
//     the file itself. Watching starts at the first call, is retried while
//     it cannot tell for want of the folder, and once lost is not retaken.
//   * Thread-safe: concurrent calls are serialised, so a caller that sees
//     an unchanged counter knows no change was queued before its call.
#pragma once

#include <cstdint>
#include <string>

#include "common/mutex.h"

namespace somm {

class FileChangeWatch {
 public:
  explicit FileChangeWatch(std::string path);
  ~FileChangeWatch();
  FileChangeWatch(const FileChangeWatch&) = delete;
  FileChangeWatch& operator=(const FileChangeWatch&) = delete;

  int64_t Generation() SOMM_EXCLUDES(mu_);

 private:
  // Starts watching the folder; false when it cannot.
  bool Start() SOMM_REQUIRES(mu_);

  const std::string folder_;
  const std::string name_;
  Mutex mu_;
  int fd_ SOMM_GUARDED_BY(mu_) = -1;
  bool watching_ SOMM_GUARDED_BY(mu_) = false;
  bool lost_ SOMM_GUARDED_BY(mu_) = false;  // watching stopped for good
  int64_t generation_ SOMM_GUARDED_BY(mu_) = 0;
};

}  // namespace somm
