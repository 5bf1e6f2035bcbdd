#include "common/file_change_watch.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace somm {

FileChangeWatch::FileChangeWatch(std::string path)
    : folder_(std::filesystem::path(path).parent_path().string()),
      name_(std::filesystem::path(path).filename().string()) {}

FileChangeWatch::~FileChangeWatch() {
  MutexLock lock(&mu_);
  if (fd_ >= 0) close(fd_);
}

bool FileChangeWatch::Start() {
  if (fd_ < 0) fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) {
    lost_ = true;  // no inotify here, or the user's instances are spent
    return false;
  }
  constexpr uint32_t kEvents = IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE |
                               IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;
  if (inotify_add_watch(fd_, folder_.empty() ? "." : folder_.c_str(), kEvents) < 0) {
    // No folder yet: retried at the next call. Anything else: for good.
    if (errno != ENOENT) lost_ = true;
    return false;
  }
  return true;
}

int64_t FileChangeWatch::Generation() {
  MutexLock lock(&mu_);
  if (lost_) return -1;
  if (!watching_) {
    if (!Start()) return -1;
    watching_ = true;
    ++generation_;  // a start is a change: what was seen before is unknown
  }
  alignas(inotify_event) char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: nothing (more) queued
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if (event->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
        lost_ = true;  // the folder went: look at the file itself from now on
        return -1;
      }
      if ((event->mask & IN_Q_OVERFLOW) || (event->len > 0 && name_ == event->name)) {
        ++generation_;
      }
    }
  }
  return generation_;
}

}  // namespace somm
