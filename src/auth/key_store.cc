#include "auth/key_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "crypto/digest.h"

namespace somm::auth {
namespace fs = std::filesystem;
namespace {

constexpr size_t kIdHexDigits = 16;
constexpr size_t kSecretBytes = 32;
constexpr char kKeyPrefix[] = "somm_";

bool IsHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return !s.empty();
}

std::string HashOf(std::string_view id, std::string_view secret) {
  std::string material(id);
  material += ':';
  material += secret;
  return crypto::Sha256Hex(material);
}

// Splits "somm_<id>_<secret>"; false when the text has another shape.
bool SplitKey(std::string_view key, std::string_view* id, std::string_view* secret) {
  const std::string_view prefix(kKeyPrefix);
  if (key.size() != prefix.size() + kIdHexDigits + 1 + 2 * kSecretBytes) return false;
  if (key.substr(0, prefix.size()) != prefix) return false;
  *id = key.substr(prefix.size(), kIdHexDigits);
  if (key[prefix.size() + kIdHexDigits] != '_') return false;
  *secret = key.substr(prefix.size() + kIdHexDigits + 1);
  return IsHex(*id) && IsHex(*secret);
}

// An exclusive flock on "<path>.lock" for one read-modify-write.
class FileLock {
 public:
  explicit FileLock(const std::string& path)
      : fd_(::open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
// days_from_civil): timegm without the process's time zone or locale.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool LeapYear(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// Reads exactly `n` digits at `*pos` of `s`.
bool Digits(std::string_view s, size_t* pos, size_t n, int* out) {
  if (*pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool Expect(std::string_view s, size_t* pos, std::string_view any_of) {
  if (*pos >= s.size() || any_of.find(s[*pos]) == std::string_view::npos) return false;
  ++*pos;
  return true;
}

// "YYYY-MM-DD" or an RFC 3339 date-time; false for anything else.
bool ParseDate(std::string_view s, int64_t* out) {
  static constexpr int kDaysIn[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  size_t pos = 0;
  int year, month, day, hour = 0, minute = 0, second = 0;
  if (!Digits(s, &pos, 4, &year) || !Expect(s, &pos, "-") || !Digits(s, &pos, 2, &month) ||
      !Expect(s, &pos, "-") || !Digits(s, &pos, 2, &day)) {
    return false;
  }
  if (month < 1 || month > 12) return false;
  const int month_days = kDaysIn[month - 1] + (month == 2 && LeapYear(year) ? 1 : 0);
  if (day < 1 || day > month_days) return false;
  int64_t offset_s = 0;
  if (pos < s.size()) {
    if (!Expect(s, &pos, "Tt ") || !Digits(s, &pos, 2, &hour) || !Expect(s, &pos, ":") ||
        !Digits(s, &pos, 2, &minute) || !Expect(s, &pos, ":") || !Digits(s, &pos, 2, &second)) {
      return false;
    }
    // RFC 3339 allows a leap second (60); it lands on the next minute's 0.
    if (hour > 23 || minute > 59 || second > 60) return false;
    if (pos < s.size() && s[pos] == '.') {
      ++pos;
      const size_t first = pos;
      while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
      if (pos == first) return false;
    }
    if (Expect(s, &pos, "Zz")) {
      // UTC
    } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
      const int sign = s[pos++] == '-' ? -1 : 1;
      int oh, om;
      if (!Digits(s, &pos, 2, &oh) || !Expect(s, &pos, ":") || !Digits(s, &pos, 2, &om) ||
          oh > 23 || om > 59) {
        return false;
      }
      offset_s = sign * (oh * 3600 + om * 60);
    } else {
      // A time without an offset is ambiguous; RFC 3339 requires one.
      return false;
    }
    if (pos != s.size()) return false;
  }
  *out = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) * 86400 +
         hour * 3600 + minute * 60 + second - offset_s;
  return true;
}

StatusOr<std::string> ReadWhole(const std::string& path, bool* missing) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    *missing = !fs::exists(path, ec);
    if (*missing) return std::string();
    return Unavailable("cannot read the key file " + path);
  }
  *missing = false;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int64_t SystemUnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

StatusOr<int64_t> ParseDurationSeconds(std::string_view text) {
  const auto bad = [&] {
    return InvalidArgument("duration '" + std::string(text) +
                           "' must be a whole number with a unit: s, m, h, d or w (e.g. 90d, "
                           "12h, 30m)");
  };
  if (text.size() < 2) return bad();
  int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    case 'w':
      unit = 7 * 86400;
      break;
    default:
      return bad();
  }
  const std::string_view number = text.substr(0, text.size() - 1);
  // Ten digits of weeks is already past year 10^8: anything longer is a typo
  // and would overflow.
  if (number.size() > 10) return bad();
  int64_t n = 0;
  for (char c : number) {
    if (c < '0' || c > '9') return bad();
    n = n * 10 + (c - '0');
  }
  return n * unit;
}

StatusOr<int64_t> ParseExpiry(std::string_view text, int64_t now_unix) {
  int64_t at = 0;
  if (ParseDate(text, &at)) return at;
  StatusOr<int64_t> duration = ParseDurationSeconds(text);
  if (duration.ok()) return now_unix + *duration;
  return InvalidArgument("'" + std::string(text) +
                         "' is neither a duration (90d, 12h, 30m, 45s) nor a UTC date "
                         "(YYYY-MM-DD or RFC 3339, e.g. 2026-03-01T12:00:00Z)");
}

std::string FormatUtc(int64_t unix_seconds) {
  char out[32] = "?";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (gmtime_r(&t, &tm) != nullptr) std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kUser:
      return "user";
    case Role::kMetrics:
      return "metrics";
  }
  return "unknown";
}

StatusOr<Role> ParseRole(std::string_view name) {
  if (name == "admin") return Role::kAdmin;
  if (name == "user") return Role::kUser;
  if (name == "metrics") return Role::kMetrics;
  return InvalidArgument("unknown role '" + std::string(name) + "' (use admin, user or metrics)");
}

Status CheckTenantName(std::string_view tenant) {
  if (tenant.empty() || tenant.size() > 64 ||
      tenant.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
          std::string_view::npos) {
    return InvalidArgument("tenant '" + std::string(tenant) +
                           "' must be 1-64 letters, digits, '-', '_' or '.'");
  }
  return Status::Ok();
}

StatusOr<std::vector<KeyRecord>> ParseKeyFile(const std::string& text, const std::string& source) {
  std::vector<KeyRecord> out;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    KeyRecord r;
    std::string role, state;
    if (!(fields >> r.id >> r.tenant >> role >> r.created_unix >> state >> r.hash)) {
      return InvalidArgument(source + ":" + std::to_string(number) +
                             ": expected '<id> <tenant> <role> <created_unix> active|revoked "
                             "<sha256> [expires=<unix>]'");
    }
    std::string extra, more;
    if (fields >> extra) {
      // Strict: a field this version does not know could be a restriction
      // (as an expiry is) that ignoring would lift.
      constexpr std::string_view kExpires = "expires=";
      const std::string value = extra.rfind(kExpires, 0) == 0 ? extra.substr(kExpires.size()) : "";
      if (value.empty() || value.size() > 18 ||
          value.find_first_not_of("0123456789") != std::string::npos || (fields >> more)) {
        return InvalidArgument(source + ":" + std::to_string(number) + ": unexpected '" + extra +
                               (more.empty() ? "" : " " + more) +
                               "' after the hash (only 'expires=<unix seconds>' may follow)");
      }
      r.expires_unix = std::stoll(value);
      if (r.expires_unix == 0) {
        return InvalidArgument(source + ":" + std::to_string(number) +
                               ": expires= must be a positive unix time");
      }
    }
    StatusOr<Role> parsed = ParseRole(role);
    if (!parsed.ok())
      return InvalidArgument(source + ":" + std::to_string(number) + ": " +
                             parsed.status().message());
    r.role = *parsed;
    if (state != "active" && state != "revoked") {
      return InvalidArgument(source + ":" + std::to_string(number) + ": state '" + state +
                             "' is neither active nor revoked");
    }
    r.revoked = state == "revoked";
    if (r.id.size() != kIdHexDigits || !IsHex(r.id) || r.hash.size() != 64 || !IsHex(r.hash)) {
      return InvalidArgument(source + ":" + std::to_string(number) + ": malformed id or hash");
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string RenderKeyFile(const std::vector<KeyRecord>& records) {
  std::string out =
      "# somm API keys (somm keys create|list|rotate|revoke); hashes only, never a key.\n"
      "# <id> <tenant> <role> <created_unix> active|revoked <sha256(id:secret)> "
      "[expires=<unix>]\n";
  for (const KeyRecord& r : records) {
    out += r.id + " " + r.tenant + " " + RoleName(r.role) + " " + std::to_string(r.created_unix) +
           " " + (r.revoked ? "revoked" : "active") + " " + r.hash;
    // Only when set: a line without it is what older somm expect.
    if (r.expires_unix != 0) out += " expires=" + std::to_string(r.expires_unix);
    out += "\n";
  }
  return out;
}

KeyStore::KeyStore(std::string path, UnixClock now_unix)
    : path_(std::move(path)),
      now_unix_(now_unix ? std::move(now_unix) : UnixClock(SystemUnixNow)),
      watch_(path_) {}

std::string KeyStore::DefaultPath(const std::string& repository) {
  return (fs::path(repository) / ".somm" / "keys").string();
}

StatusOr<std::vector<KeyRecord>> KeyStore::List() const {
  bool missing = false;
  SOMM_ASSIGN_OR_RETURN(std::string text, ReadWhole(path_, &missing));
  return ParseKeyFile(text, path_);
}

Status KeyStore::Update(const std::function<Status(std::vector<KeyRecord>&)>& change) {
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  if (ec)
    return Unavailable("cannot create " + fs::path(path_).parent_path().string() + ": " +
                       ec.message());
  FileLock lock(path_);
  if (!lock.ok()) return Unavailable("cannot lock " + path_ + ".lock");
  SOMM_ASSIGN_OR_RETURN(std::vector<KeyRecord> records, List());
  SOMM_RETURN_IF_ERROR(change(records));
  const std::string temp = path_ + ".tmp." + std::to_string(::getpid());
  {
    const int fd = ::open(temp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return Unavailable("cannot write " + temp);
    const std::string text = RenderKeyFile(records);
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const bool synced = ::fsync(fd) == 0;
    ::close(fd);
    if (!written || !synced) {
      ::unlink(temp.c_str());
      return Unavailable("cannot write " + temp);
    }
  }
  fs::rename(temp, path_, ec);
  if (ec) return Unavailable("cannot replace " + path_ + ": " + ec.message());
  return Status::Ok();
}

StatusOr<NewKey> KeyStore::MakeKey(const std::string& tenant, Role role,
                                   int64_t expires_unix) const {
  SOMM_RETURN_IF_ERROR(CheckTenantName(tenant));
  const int64_t now = now_unix_();
  if (expires_unix != 0 && expires_unix <= now) {
    return InvalidArgument("the expiry " + FormatUtc(expires_unix) +
                           " is not in the future; the key could never be used");
  }
  SOMM_ASSIGN_OR_RETURN(std::string id_bytes, crypto::RandomBytes(kIdHexDigits / 2));
  SOMM_ASSIGN_OR_RETURN(std::string secret_bytes, crypto::RandomBytes(kSecretBytes));
  NewKey out;
  out.record.id = crypto::Hex(id_bytes);
  out.record.tenant = tenant;
  out.record.role = role;
  out.record.created_unix = now;
  out.record.expires_unix = expires_unix;
  const std::string secret = crypto::Hex(secret_bytes);
  out.record.hash = HashOf(out.record.id, secret);
  out.key = kKeyPrefix + out.record.id + "_" + secret;
  return out;
}

namespace {
// 64 random bits: a clash is a broken generator, not bad luck.
Status CheckNoClash(const std::vector<KeyRecord>& records, const std::string& id) {
  for (const KeyRecord& r : records) {
    if (r.id == id) return Internal("key id clash; the random generator is suspect");
  }
  return Status::Ok();
}
}  // namespace

StatusOr<NewKey> KeyStore::Create(const std::string& tenant, Role role, int64_t expires_unix) {
  SOMM_ASSIGN_OR_RETURN(NewKey out, MakeKey(tenant, role, expires_unix));
  SOMM_RETURN_IF_ERROR(Update([&](std::vector<KeyRecord>& records) {
    SOMM_RETURN_IF_ERROR(CheckNoClash(records, out.record.id));
    records.push_back(out.record);
    return Status::Ok();
  }));
  return out;
}

StatusOr<Rotation> KeyStore::Rotate(const std::string& id, int64_t grace_s,
                                    int64_t new_expires_unix) {
  if (grace_s < 0) return InvalidArgument("the grace period cannot be negative");
  Rotation out;
  SOMM_RETURN_IF_ERROR(Update([&](std::vector<KeyRecord>& records) -> Status {
    // Decided under the file lock, on the file as it is now: a concurrent
    // revoke or rotate of the same key is seen, not overwritten.
    auto old = std::find_if(records.begin(), records.end(),
                            [&](const KeyRecord& r) { return r.id == id; });
    if (old == records.end()) return NotFound("no key with id '" + id + "' in " + path_);
    if (old->revoked) {
      return FailedPrecondition("key " + id + " is revoked; create a new key instead");
    }
    const int64_t now = now_unix_();
    if (old->ExpiredAt(now)) {
      return FailedPrecondition("key " + id + " expired at " + FormatUtc(old->expires_unix) +
                                "; create a new key instead");
    }
    SOMM_ASSIGN_OR_RETURN(out.fresh, MakeKey(old->tenant, old->role, new_expires_unix));
    SOMM_RETURN_IF_ERROR(CheckNoClash(records, out.fresh.record.id));
    // Rotation never extends a key's life: an earlier expiry stands.
    const int64_t until = now + grace_s;
    if (old->expires_unix == 0 || until < old->expires_unix) old->expires_unix = until;
    out.old = *old;
    records.push_back(out.fresh.record);
    return Status::Ok();
  }));
  return out;
}

Status KeyStore::Revoke(const std::string& id) {
  return Update([&](std::vector<KeyRecord>& records) {
    for (KeyRecord& r : records) {
      if (r.id == id) {
        r.revoked = true;
        return Status::Ok();
      }
    }
    return NotFound("no key with id '" + id + "' in " + path_);
  });
}

void KeyStore::Refresh() {
  // A change queued before this call started moves the generation, so an
  // unchanged one means the file is as it was when it was last looked at.
  const int64_t generation = watch_.Generation();
  if (generation >= 0) {
    MutexLock lock(&mu_);
    if (generation == seen_generation_) return;
  }
  struct stat st {};
  FileSignature now;
  if (::stat(path_.c_str(), &st) == 0) {
    now.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    now.size = st.st_size;
    now.inode = st.st_ino;
  }
  {
    MutexLock lock(&mu_);
    if (now == seen_) {
      seen_generation_ = generation;
      return;
    }
  }
  std::map<std::string, KeyRecord> fresh;
  StatusOr<std::vector<KeyRecord>> records = List();
  // An unreadable or malformed file admits nobody: failing closed is the
  // safe side, and `somm keys list` names the problem.
  if (records.ok()) {
    for (KeyRecord& r : *records) fresh[r.id] = std::move(r);
  }
  MutexLock lock(&mu_);
  by_id_ = std::move(fresh);
  seen_ = now;
  seen_generation_ = generation;
}

StatusOr<KeyRecord> KeyStore::Verify(std::string_view key) {
  std::string_view id, secret;
  if (!SplitKey(key, &id, &secret)) return Unauthenticated("invalid API key");
  Refresh();
  const std::string hash = HashOf(id, secret);
  MutexLock lock(&mu_);
  auto it = by_id_.find(std::string(id));
  if (it == by_id_.end() || !crypto::ConstantTimeEquals(it->second.hash, hash)) {
    return Unauthenticated("invalid API key");
  }
  if (it->second.revoked) return Unauthenticated("API key " + it->second.id + " has been revoked");
  if (it->second.ExpiredAt(now_unix_())) {
    return Unauthenticated("API key " + it->second.id + " expired at " +
                           FormatUtc(it->second.expires_unix));
  }
  return it->second;
}

}  // namespace somm::auth
