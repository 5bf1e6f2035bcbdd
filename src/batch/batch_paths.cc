#include "batch/batch_paths.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

namespace somm {
namespace fs = std::filesystem;

namespace {

// Whether `path` is `dir` or below it; both resolved.
bool Within(const fs::path& path, const fs::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p) {
    if (d->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

// A folder name for a tenant: only what cannot climb or hide.
bool IsFolderName(const std::string& s) {
  return !s.empty() && s.size() <= 128 && s[0] != '.' &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
         });
}

// `p` with every link and ".." resolved as far as it exists, the rest
// normalised lexically (weakly_canonical).
StatusOr<fs::path> ResolvedPath(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(p, ec);
  if (ec) return InvalidArgument(ec.message());
  return r;
}

Status MakePrivateFolder(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) return Internal("the batch folder cannot be made");
  ::chmod(dir.c_str(), 0700);
  return Status::Ok();
}

}  // namespace

StatusOr<BatchPaths> BatchPaths::Create(Options options) {
  if (options.root.empty()) return InvalidArgument("--batch-root is empty");
  SOMM_RETURN_IF_ERROR(MakePrivateFolder(options.root));
  BatchPaths paths;
  SOMM_ASSIGN_OR_RETURN(fs::path root, ResolvedPath(options.root));
  paths.root_ = root.string();
  for (const std::string& r : options.admin_roots) {
    std::error_code ec;
    fs::path resolved = fs::canonical(r, ec);
    if (ec) return InvalidArgument("--batch-admin-root '" + r + "' is not a folder the server has");
    paths.admin_roots_.push_back(resolved.string());
  }
  if (!options.repository.empty()) {
    SOMM_ASSIGN_OR_RETURN(fs::path repo, ResolvedPath(options.repository));
    paths.repository_ = repo.string();
    // Inside the repository, only below its .somm/ is a root harmless.
    if (Within(repo, root) || (Within(root, repo) && !Within(root, repo / ".somm"))) {
      return InvalidArgument("--batch-root must not hold the model repository nor lie among its "
                             "models (the default is <repo>/.somm/batch-files)");
    }
  }
  return paths;
}

StatusOr<std::string> BatchPaths::FolderOf(const Caller& caller) const {
  std::string name = "default";
  if (caller.authenticated) name = caller.admin ? "admin" : caller.tenant;
  // A tenant whose name could not be a folder gets none (tenant names are
  // the operator's, so this is a misconfiguration, not an attack).
  if (!IsFolderName(name) || (caller.authenticated && !caller.admin && name == "admin")) {
    return PermissionDenied("this key's tenant has no batch folder");
  }
  const fs::path dir = fs::path(root_) / name;
  SOMM_RETURN_IF_ERROR(MakePrivateFolder(dir));
  return dir.string();
}

std::vector<std::string> BatchPaths::RootsOf(const Caller& caller) const {
  std::vector<std::string> roots;
  StatusOr<std::string> own = FolderOf(caller);
  if (own.ok()) roots.push_back(*own);
  if (caller.authenticated && caller.admin) {
    roots.insert(roots.end(), admin_roots_.begin(), admin_roots_.end());
  }
  return roots;
}

bool BatchPaths::Contains(const Caller& caller, const std::string& path) const {
  StatusOr<fs::path> resolved = ResolvedPath(path);
  if (!resolved.ok()) return false;
  for (const std::string& r : RootsOf(caller)) {
    if (Within(*resolved, r)) return true;
  }
  return false;
}

StatusOr<std::string> BatchPaths::Resolve(const Caller& caller, const std::string& given,
                                          const char* what) const {
  const std::string quoted = std::string("batch ") + what + " '" + given + "'";
  if (given.empty()) return InvalidArgument(std::string("batch job: '") + what + "' is empty");
  SOMM_ASSIGN_OR_RETURN(std::string folder, FolderOf(caller));
  const fs::path p = fs::path(given).is_absolute() ? fs::path(given) : fs::path(folder) / given;
  StatusOr<fs::path> resolved = ResolvedPath(p);
  if (!resolved.ok() || !Contains(caller, resolved->string())) {
    return PermissionDenied(quoted +
                            " is outside this key's batch folder: name a path relative to it "
                            "(docs/lifecycle.md, \"Batch jobs\")");
  }
  return resolved->string();
}

StatusOr<std::string> BatchPaths::Input(const Caller& caller, const std::string& given) const {
  SOMM_ASSIGN_OR_RETURN(std::string path, Resolve(caller, given, "input"));
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return InvalidArgument("batch input '" + given + "' does not exist in this key's batch folder");
  }
  return path;
}

StatusOr<std::string> BatchPaths::Output(const Caller& caller, const std::string& given) const {
  SOMM_ASSIGN_OR_RETURN(std::string path, Resolve(caller, given, "output"));
  const fs::path out(path);
  // The repository and its .somm/ hold models, keys and the audit log; only
  // the batch root inside them is a job's to write.
  if (!repository_.empty() && Within(out, repository_) && !Within(out, root_)) {
    return PermissionDenied("batch output '" + given + "' lies in the model repository");
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  // Made, then resolved again: a link raced in between is caught here.
  if (ec || !fs::is_directory(out, ec) || !Contains(caller, out.string())) {
    return InvalidArgument("batch output '" + given + "' is not a folder the server can make");
  }
  return path;
}

}  // namespace somm
