// BatchPaths: where a batch job may read and write. A job's input and output
// are confined to its tenant's folder, <root>/<tenant>/, below one root that
// the operator configures (--batch-root; by default <repo>/.somm/batch-files).
// A caller names paths relative to its folder ("in/digits", "out/run-1"), or
// absolute paths inside it; the checks run on the path with every symbolic
// link and ".." resolved, so neither a link planted in the folder nor a
// "../.." climbs out. Admin keys are confined the same way, to the folder
// "admin", unless the operator names more roots (--batch-admin-root), which
// admin keys may then use as they are.
//
// Never allowed, whatever the roots: an output inside the model repository
// or its .somm/ (keys, audit log, variants) outside the batch root itself;
// there a job's files would become a model, a key file or an audit record.
//
// Errors quote the path as the caller gave it and never the server's own
// paths, and a path outside the folder gets the same answer whether or not
// it exists, so nobody learns what the server's file system holds.
//
// Thread-safety: immutable after construction; every method may be called
// concurrently.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "api/caller.h"

namespace somm {

class BatchPaths {
 public:
  struct Options {
    std::string root;                      // required: the per-tenant folders' parent
    std::vector<std::string> admin_roots;  // more roots for admin keys; default none
    std::string repository;                // "" = no repository to protect
  };
  // Creates the root (0700) when missing.
  static StatusOr<BatchPaths> Create(Options options);

  // The caller's folder, created (0700) when missing: <root>/<tenant>, where
  // an unauthenticated caller (--auth none) is "default" and an admin
  // "admin".
  StatusOr<std::string> FolderOf(const Caller& caller) const;
  // A job's input (a folder or a file that exists), resolved.
  StatusOr<std::string> Input(const Caller& caller, const std::string& given) const;
  // A job's output folder, resolved and created.
  StatusOr<std::string> Output(const Caller& caller, const std::string& given) const;
  // Whether `path` (one item of an input folder, resolved again just before
  // it is read) still lies inside the caller's folders: a link swapped in
  // after the submission is refused then.
  bool Contains(const Caller& caller, const std::string& path) const;

  const std::string& root() const { return root_; }

 private:
  BatchPaths() = default;
  std::vector<std::string> RootsOf(const Caller& caller) const;
  StatusOr<std::string> Resolve(const Caller& caller, const std::string& given,
                                const char* what) const;

  std::string root_;  // resolved
  std::vector<std::string> admin_roots_;
  std::string repository_;  // resolved
};

}  // namespace somm
