// Mutex, SharedMutex and their scoped locks, annotated for Clang's thread
// safety analysis (-Wthread-safety), as LevelDB's port::Mutex is: a field
// marked SOMM_GUARDED_BY(mu_) can then only be touched with mu_ held, and the
// compiler says so. Under GCC the annotations expand to nothing and these are
// thin wrappers of the std types. build/ uses GCC; the sanitizer trees of
// scripts/test use clang with -Wthread-safety as an error (CMakeLists.txt),
// so CI runs the analysis over the serving core. The annotations document
// which lock guards what either way (docs/architecture.md, "Locks").
#pragma once

#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define SOMM_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SOMM_THREAD_ANNOTATION(x)
#endif

#define SOMM_CAPABILITY(x) SOMM_THREAD_ANNOTATION(capability(x))
#define SOMM_SCOPED_CAPABILITY SOMM_THREAD_ANNOTATION(scoped_lockable)
#define SOMM_GUARDED_BY(x) SOMM_THREAD_ANNOTATION(guarded_by(x))
#define SOMM_PT_GUARDED_BY(x) SOMM_THREAD_ANNOTATION(pt_guarded_by(x))
#define SOMM_ACQUIRED_BEFORE(...) SOMM_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define SOMM_ACQUIRED_AFTER(...) SOMM_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define SOMM_REQUIRES(...) SOMM_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define SOMM_REQUIRES_SHARED(...) SOMM_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define SOMM_EXCLUDES(...) SOMM_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define SOMM_ACQUIRE(...) SOMM_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define SOMM_ACQUIRE_SHARED(...) SOMM_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define SOMM_RELEASE(...) SOMM_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define SOMM_RELEASE_SHARED(...) SOMM_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define SOMM_RELEASE_GENERIC(...) SOMM_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define SOMM_NO_THREAD_SAFETY_ANALYSIS SOMM_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace somm {

class SOMM_CAPABILITY("mutex") Mutex {
 public:
  void Lock() SOMM_ACQUIRE() { mu_.lock(); }
  void Unlock() SOMM_RELEASE() { mu_.unlock(); }
  // For condition variables: the std mutex underneath.
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

class SOMM_CAPABILITY("shared mutex") SharedMutex {
 public:
  void Lock() SOMM_ACQUIRE() { mu_.lock(); }
  void Unlock() SOMM_RELEASE() { mu_.unlock(); }
  void LockShared() SOMM_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() SOMM_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

class SOMM_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) SOMM_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() SOMM_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class SOMM_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) SOMM_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterLock() SOMM_RELEASE() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* const mu_;
};

class SOMM_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) SOMM_ACQUIRE_SHARED(mu) : mu_(mu) { mu_->LockShared(); }
  ~ReaderLock() SOMM_RELEASE_GENERIC() { mu_->UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace somm
