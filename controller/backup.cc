#include "controller/backup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/json_text.h"
#include "controller/backup_archive.h"
#include "controller/store/data_dir_lock.h"
#include "controller/store/migrations.h"
#include "controller/store/sqlite_backup.h"

namespace kiln {

namespace {

using nlohmann::json;

constexpr std::string_view kFormat = "kiln-backup";
constexpr int kFormatVersion = 1;
// manifest.json is a few KiB (a line per image); anything past this is not ours.
constexpr int64_t kMaxManifestBytes = 4 << 20;
constexpr int64_t kMaxDatabaseBytes = INT64_MAX / 2;

constexpr std::string_view kBackupUsage =
    "usage: kilnd backup --data-dir DIR --to FILE [--key-file PATH] [--overwrite]\n"
    "  Copies the SQLite database of the kilnd using DIR (running or not) into FILE with SQLite's\n"
    "  online backup API. The key file (--key-file, $KILN_KEY_FILE, else DIR/kiln.key) is named in\n"
    "  the backup by path and fingerprint, never copied: keep it apart. Image files are not\n"
    "  included. FILE must not exist unless --overwrite. docs/operations.md.\n";
constexpr std::string_view kRestoreUsage =
    "usage: kilnd restore --from FILE --data-dir DIR [--key-file PATH] [--skip-key-check]\n"
    "  Restores a `kilnd backup` FILE into DIR, which must be absent or empty (a kiln.key put\n"
    "  there for the restored kilnd aside). The key kilnd will use (--key-file, $KILN_KEY_FILE,\n"
    "  else DIR/kiln.key) must be the one the backup names, unless --skip-key-check (the restored\n"
    "  kilnd then refuses to start until that key is in place). docs/operations.md.\n";

int fail(std::string_view cmd, const std::string& message, int code = 1) {
  std::cerr << "kilnd " << cmd << ": " << message << "\n";
  return code;
}

std::string absolute_path(const std::string& p) {
  if (!p.empty() && p.front() == '/') return p;
  char buf[PATH_MAX];
  if (::getcwd(buf, sizeof buf) == nullptr) return p;
  return std::string(buf) + "/" + p;
}

std::string dir_of(const std::string& path) {
  std::string::size_type slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0;
}

// Flag parsing shared by both commands: "--flag V" and "--flag=V".
struct Args {
  std::vector<std::string> argv;
  std::size_t i = 1;
  bool value(std::string_view flag, std::string& out, std::string* error) {
    std::string_view a = argv[i];
    if (a == flag) {
      if (i + 1 >= argv.size()) {
        *error = std::string(flag) + " needs a value";
        return true;
      }
      out = argv[++i];
      return true;
    }
    if (a.size() > flag.size() && a.substr(0, flag.size()) == flag && a[flag.size()] == '=') {
      out = std::string(a.substr(flag.size() + 1));
      return true;
    }
    return false;
  }
};

// The key file as kilnd locates it (controller/main.cc): --key-file, then
// $KILN_KEY_FILE, then DATA_DIR/kiln.key.
std::string key_path_for(const std::string& flag, const std::string& data_dir) {
  if (!flag.empty()) return absolute_path(flag);
  if (const char* env = std::getenv("KILN_KEY_FILE"); env != nullptr && *env != '\0') return absolute_path(env);
  return absolute_path(data_dir) + "/kiln.key";
}

// The key's bytes, as SecretBox::open_key_file reads them, without creating
// one when absent (a backup or restore must never mint a new key).
Result<SecretBox::Key> read_key(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(Code::kNotFound, "no key file at " + path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SecretBox::Key key{};
  if (bytes.size() != key.size())
    return Error(Code::kInvalidArgument, path + " is not a kiln key (" + std::to_string(bytes.size()) +
                                             " bytes, a key has " + std::to_string(key.size()) + ")");
  std::memcpy(key.data(), bytes.data(), key.size());
  return key;
}

// Names the key without revealing it: a domain-separated SHA-256, so the
// fingerprint is no hash of the key that anything else computes.
std::string fingerprint(const SecretBox::Key& key) {
  return "sha256:" + sha256_hex("kiln key fingerprint v1\n" +
                                std::string(reinterpret_cast<const char*>(key.data()), key.size()));
}

bool key_opens(const SecretBox::Key& key, const std::string& sealed) {
  if (sealed.empty()) return true;  // no kilnd ever started on it: nothing sealed to check against
  Result<std::string> opened = SecretBox(key).open(sealed);
  return opened && *opened == kKeyCheckText;
}

Result<std::string> file_sha256(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Error(Code::kInternal, "open " + path + ": " + std::strerror(errno));
  Sha256 h;
  std::vector<char> buf(1 << 16);
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.update(std::string_view(buf.data(), n));
  bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) return Error(Code::kInternal, "read " + path);
  return h.hex_digest();
}

Status fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return Error(Code::kInternal, "open " + path + ": " + std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Error(Code::kInternal, "fsync " + path + ": " + std::strerror(err));
  return ok_status();
}

json images_json(const store::DatabaseFacts& f) {
  json list = json::array();
  for (const store::ImageFiles& i : f.images) {
    json row = {{"id", i.id}, {"name", i.name}, {"state", i.state}, {"path", i.path}, {"size", i.size}};
    if (!i.served_path.empty()) row["served_path"] = i.served_path, row["served_size"] = i.served_size;
    if (!i.kernel.empty()) row["kernel"] = i.kernel;
    list.push_back(std::move(row));
  }
  return list;
}

std::string counts_line(const store::DatabaseFacts& f) {
  std::string out;
  for (const auto& [table, n] : f.row_counts) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + table;
  return out;
}

// The manifest's members, typed; anything else is a corrupt or foreign file.
struct Manifest {
  std::string kiln_version;
  std::string created_at;
  std::string source_data_dir;
  std::string schema;
  std::vector<std::string> migrations;
  std::string key_path;
  std::string key_fingerprint;
  int64_t db_size = -1;
  std::string db_sha256;
};

bool is_hex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

Result<Manifest> parse_manifest(std::string_view text) {
  Result<json> doc = parse_json(text);
  if (!doc) return Error(Code::kInvalidArgument, "manifest.json is not JSON");
  const json& j = *doc;
  auto str = [&](const json& obj, const char* key, const std::string& where) -> Result<std::string> {
    if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string())
      return Error(Code::kInvalidArgument, "manifest.json: " + where + key + " is missing or not a string");
    return obj[key].get<std::string>();
  };
  Manifest m;
  Result<std::string> format = str(j, "format", "/");
  if (!format) return format.take_error();
  if (*format != kFormat) return Error(Code::kInvalidArgument, "not a kilnd backup (format " + *format + ")");
  if (!j.contains("format_version") || !j["format_version"].is_number_integer() ||
      j["format_version"].get<int64_t>() != kFormatVersion)
    return Error(Code::kInvalidArgument, "manifest.json: /format_version is not 1 (a newer kilnd's backup?)");
  const json source = j.value("source", json());
  const json schema = j.value("schema", json());
  const json key = j.value("key", json());
  auto take = [&](std::string& field, const json& obj, const char* name, const std::string& where) -> Status {
    Result<std::string> v = str(obj, name, where);
    if (!v) return v.take_error();
    field = std::move(*v);
    return ok_status();
  };
  for (Status s : {take(m.kiln_version, j, "kiln_version", "/"), take(m.created_at, j, "created_at", "/"),
                   take(m.source_data_dir, source, "data_dir", "/source/"),
                   take(m.schema, schema, "last_migration", "/schema/"), take(m.key_path, key, "path", "/key/"),
                   take(m.key_fingerprint, key, "fingerprint", "/key/")})
    if (!s) return s.take_error();
  if (!schema.contains("migrations") || !schema["migrations"].is_array() || schema["migrations"].size() > 10000)
    return Error(Code::kInvalidArgument, "manifest.json: /schema/migrations is missing or not a list");
  for (const json& name : schema["migrations"]) {
    if (!name.is_string()) return Error(Code::kInvalidArgument, "manifest.json: /schema/migrations holds a non-string");
    m.migrations.push_back(name.get<std::string>());
  }
  if (!j.contains("files") || !j["files"].is_array())
    return Error(Code::kInvalidArgument, "manifest.json: /files is missing or not a list");
  for (const json& f : j["files"]) {
    if (!f.is_object() || f.value("name", "") != "kiln.db") continue;
    if (!f.contains("size") || !f["size"].is_number_integer() || f["size"].get<int64_t>() < 0)
      return Error(Code::kInvalidArgument, "manifest.json: /files kiln.db size is missing or negative");
    m.db_size = f["size"].get<int64_t>();
    Result<std::string> sha = str(f, "sha256", "/files/kiln.db/");
    if (!sha) return sha.take_error();
    if (!is_hex64(*sha)) return Error(Code::kInvalidArgument, "manifest.json: /files kiln.db sha256 is not SHA-256 hex");
    m.db_sha256 = *sha;
  }
  if (m.db_size < 0) return Error(Code::kInvalidArgument, "manifest.json: /files names no kiln.db");
  return m;
}

// Files in `dir` that make it "not empty" for a restore. kiln.lock (a lock
// file, no data: a failed restore's) and the key kilnd will read (the
// operator may put it there first) do not count.
Result<std::vector<std::string>> occupants(const std::string& dir, const std::string& key_path) {
  std::vector<std::string> found;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return found;
    return Error(Code::kInvalidArgument, "--data-dir " + dir + " cannot be read: " + std::strerror(errno));
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || name == "kiln.lock") continue;
    if (absolute_path(dir) + "/" + name == key_path) continue;
    found.push_back(name);
  }
  ::closedir(d);
  return found;
}

}  // namespace

int backup_main(int argc, char** argv) {
  constexpr std::string_view cmd = "backup";
  Args a{std::vector<std::string>(argv, argv + argc)};
  std::string data_dir, to, key_flag, error;
  bool overwrite = false;
  for (; a.i < a.argv.size(); ++a.i) {
    std::string_view arg = a.argv[a.i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kBackupUsage;
      return 0;
    }
    if (arg == "--overwrite") {
      overwrite = true;
      continue;
    }
    if (arg == "--database" || arg.substr(0, 11) == "--database=")
      return fail(cmd, "PostgreSQL is backed up with pg_dump (docs/scale-out.md); this command copies SQLite", 2);
    if (a.value("--data-dir", data_dir, &error) || a.value("--to", to, &error) ||
        a.value("--key-file", key_flag, &error)) {
      if (!error.empty()) return fail(cmd, error, 2);
      continue;
    }
    return fail(cmd, "unknown argument " + std::string(arg) + " (see --help)", 2);
  }
  if (data_dir.empty()) return fail(cmd, "--data-dir is required (the kilnd's data directory)", 2);
  if (to.empty()) return fail(cmd, "--to is required (the backup file to write)", 2);
  ::umask(077);  // the copy holds sealed secrets and token hashes
  const std::string db_path = absolute_path(data_dir) + "/kiln.db";
  if (!exists(db_path)) return fail(cmd, "no SQLite database at " + db_path + " (PostgreSQL: pg_dump, docs/scale-out.md)");
  to = absolute_path(to);
  if (exists(to) && !overwrite) return fail(cmd, to + " already exists (pass --overwrite to replace it)");
  const std::string key_path = key_path_for(key_flag, data_dir);
  Result<SecretBox::Key> key = read_key(key_path);
  if (!key)
    return fail(cmd, key.error().message + ": the database's secrets are sealed with it; name it with --key-file");

  const std::string tmp = to + ".kiln-tmp-" + std::to_string(::getpid());
  const std::string tmp_db = tmp + ".db";
  auto cleanup = [&] {
    ::unlink(tmp.c_str());
    ::unlink(tmp_db.c_str());
    ::unlink((tmp_db + "-journal").c_str());
  };
  Result<store::DatabaseFacts> facts = store::copy_live_database(db_path, tmp_db);
  if (!facts) return fail(cmd, "copying " + db_path + ": " + facts.error().message);
  if (!key_opens(*key, facts->key_check)) {
    cleanup();
    return fail(cmd, "the key in " + key_path + " does not open this database's secrets: name the right one with --key-file");
  }
  Result<std::string> db_sha = file_sha256(tmp_db);
  struct stat st{};
  if (!db_sha || ::stat(tmp_db.c_str(), &st) != 0) {
    cleanup();
    return fail(cmd, "reading the copy: " + (db_sha ? std::string(std::strerror(errno)) : db_sha.error().message));
  }
  SystemClock clock;
  const int64_t now = clock.now_ms();
  json counts = json::object();
  for (const auto& [table, n] : facts->row_counts) counts[table] = n;
  json manifest = {
      {"format", kFormat},
      {"format_version", kFormatVersion},
      {"kiln_version", KILN_VERSION},
      {"created_at", format_rfc3339(now)},
      {"source", {{"data_dir", absolute_path(data_dir)}, {"database", "sqlite"}}},
      {"schema", {{"last_migration", facts->schema}, {"migrations", facts->migrations}}},
      // Named, never copied: the backup and the key are kept apart.
      {"key", {{"path", key_path}, {"fingerprint", fingerprint(*key)}, {"included", false}}},
      {"files", json::array({{{"name", "kiln.db"}, {"size", static_cast<int64_t>(st.st_size)}, {"sha256", *db_sha}}})},
      {"row_counts", counts},
      {"images",
       {{"content_included", false},
        {"own_dir", absolute_path(data_dir) + "/images"},
        {"referenced", images_json(*facts)}}},
  };
  const std::string manifest_text = dump_json(manifest, 2) + "\n";

  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::string why = std::strerror(errno);
    cleanup();
    return fail(cmd, "cannot create " + tmp + ": " + why);
  }
  std::FILE* out = ::fdopen(fd, "wb");
  backup::TarWriter w(out);
  Status s = w.add("manifest.json", manifest_text, now / 1000);
  if (s) s = w.add("manifest.sha256", sha256_hex(manifest_text) + "\n", now / 1000);
  if (s) s = w.add_file("kiln.db", tmp_db, now / 1000);
  if (s) s = w.finish();
  if (s && std::fflush(out) != 0) s = Error(Code::kInternal, std::string("write: ") + std::strerror(errno));
  if (s && ::fsync(fd) != 0) s = Error(Code::kInternal, std::string("fsync: ") + std::strerror(errno));
  std::fclose(out);
  ::unlink(tmp_db.c_str());
  if (!s) {
    cleanup();
    return fail(cmd, "writing " + tmp + ": " + s.error().message);
  }
  // Into place: rename replaces; link refuses a FILE that appeared meanwhile.
  if (overwrite ? ::rename(tmp.c_str(), to.c_str()) != 0 : ::link(tmp.c_str(), to.c_str()) != 0) {
    std::string why = errno == EEXIST ? "it appeared while the backup ran" : std::strerror(errno);
    cleanup();
    return fail(cmd, "cannot write " + to + ": " + why);
  }
  ::unlink(tmp.c_str());
  if (Status d = fsync_path(dir_of(to), true); !d) return fail(cmd, d.error().message);
  std::cout << "backed up " << db_path << " (schema " << facts->schema << ": " << counts_line(*facts) << ") to " << to
            << "; key " << key_path << " named by fingerprint, not copied; " << facts->images.size()
            << " image(s) referenced, their files not included\n";
  return 0;
}

int restore_main(int argc, char** argv) {
  constexpr std::string_view cmd = "restore";
  Args a{std::vector<std::string>(argv, argv + argc)};
  std::string from, data_dir, key_flag, error;
  bool skip_key_check = false;
  for (; a.i < a.argv.size(); ++a.i) {
    std::string_view arg = a.argv[a.i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kRestoreUsage;
      return 0;
    }
    if (arg == "--skip-key-check") {
      skip_key_check = true;
      continue;
    }
    if (a.value("--from", from, &error) || a.value("--data-dir", data_dir, &error) ||
        a.value("--key-file", key_flag, &error)) {
      if (!error.empty()) return fail(cmd, error, 2);
      continue;
    }
    return fail(cmd, "unknown argument " + std::string(arg) + " (see --help)", 2);
  }
  if (from.empty()) return fail(cmd, "--from is required (a file written by kilnd backup)", 2);
  if (data_dir.empty()) return fail(cmd, "--data-dir is required (the new, empty data directory)", 2);
  ::umask(077);
  data_dir = absolute_path(data_dir);
  const std::string key_path = key_path_for(key_flag, data_dir);

  std::FILE* in = std::fopen(from.c_str(), "rb");
  if (in == nullptr) return fail(cmd, "cannot open " + from + ": " + std::strerror(errno));
  struct Closer {
    std::FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{in};

  Result<std::vector<std::string>> taken = occupants(data_dir, key_path);
  if (!taken) return fail(cmd, taken.error().message);
  if (!taken->empty())
    return fail(cmd, "--data-dir " + data_dir + " is not empty (it holds " + taken->front() +
                         "): restore only into a new or empty directory");
  const bool created_dir = !exists(data_dir);
  if (created_dir && ::mkdir(data_dir.c_str(), 0700) != 0)
    return fail(cmd, "cannot create --data-dir " + data_dir + ": " + std::strerror(errno));
  // No kilnd may start on the directory while the database is put there.
  Result<DataDirLock> lock = DataDirLock::acquire(data_dir);
  if (!lock) return fail(cmd, lock.error().message);

  const std::string final_db = data_dir + "/kiln.db";
  const std::string tmp_db = data_dir + "/kiln.db.restore-tmp";
  int db_fd = -1;
  std::optional<SecretBox::Key> key;
  auto undo = [&] {
    if (db_fd >= 0) ::close(db_fd);
    ::unlink(tmp_db.c_str());
    ::unlink((tmp_db + "-journal").c_str());
    ::unlink((data_dir + "/kiln.lock").c_str());
    if (created_dir) ::rmdir(data_dir.c_str());
  };

  std::string manifest_text;
  std::optional<Manifest> manifest;
  bool manifest_checked = false;
  std::string db_sha;
  int step = 0;  // members must come in the order backup writes them
  static const char* const kOrder[] = {"manifest.json", "manifest.sha256", "kiln.db"};
  Status read = backup::read_tar(in, kMaxDatabaseBytes, [&](const backup::TarMember& m, const auto& content) -> Status {
    if (step >= 3 || m.name != kOrder[step])
      return Error(Code::kInvalidArgument, "unexpected member " + m.name + " (a kilnd backup holds manifest.json, "
                                           "manifest.sha256, kiln.db in that order)");
    ++step;
    if (m.name != "kiln.db") {
      if (m.size > kMaxManifestBytes) return Error(Code::kInvalidArgument, m.name + " is too large");
      std::string text;
      if (Status s = content([&](std::string_view c) { text.append(c); return ok_status(); }); !s) return s;
      if (m.name == "manifest.json") {
        manifest_text = std::move(text);
        return ok_status();
      }
      // manifest.sha256: the manifest is trusted only once its hash matches.
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      if (text != sha256_hex(manifest_text))
        return Error(Code::kInvalidArgument, "manifest.json does not match manifest.sha256 (the file is corrupt)");
      Result<Manifest> parsed = parse_manifest(manifest_text);
      if (!parsed) return parsed.take_error();
      manifest = std::move(*parsed);
      // A migration this binary does not know: a newer kilnd's database.
      std::set<std::string> known;
      for (const store::Migration& mig : store::embedded_migrations()) known.emplace(mig.name);
      for (const std::string& name : manifest->migrations)
        if (!known.count(name))
          return Error(Code::kConflict, "the backup's schema has migration " + name +
                                            ", unknown to this kilnd (" KILN_VERSION "): restore it with a kilnd "
                                            "at least as new as " + manifest->kiln_version);
      if (!skip_key_check) {
        Result<SecretBox::Key> k = read_key(key_path);
        if (!k)
          return Error(Code::kConflict, k.error().message + ": put the key the backup names (" +
                                            manifest->key_fingerprint + ", was " + manifest->key_path +
                                            ") there or name it with --key-file, or pass --skip-key-check");
        if (fingerprint(*k) != manifest->key_fingerprint)
          return Error(Code::kConflict, "the key in " + key_path + " (" + fingerprint(*k) +
                                            ") is not the key the backup names (" + manifest->key_fingerprint +
                                            ", was " + manifest->key_path +
                                            "): name the right one with --key-file, or pass --skip-key-check");
        key = *k;
      }
      manifest_checked = true;
      return ok_status();
    }
    // kiln.db: streamed to disk while hashed; its hash decides.
    if (m.size != manifest->db_size)
      return Error(Code::kInvalidArgument, "kiln.db has " + std::to_string(m.size) + " bytes, the manifest says " +
                                               std::to_string(manifest->db_size) + " (the file is corrupt)");
    db_fd = ::open(tmp_db.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (db_fd < 0) return Error(Code::kInternal, "cannot create " + tmp_db + ": " + std::strerror(errno));
    Sha256 h;
    Status s = content([&](std::string_view c) -> Status {
      h.update(c);
      for (std::size_t done = 0; done < c.size();) {
        ssize_t n = ::write(db_fd, c.data() + done, c.size() - done);
        if (n < 0) {
          if (errno == EINTR) continue;
          return Error(Code::kInternal, "write " + tmp_db + ": " + std::strerror(errno));
        }
        done += static_cast<std::size_t>(n);
      }
      return ok_status();
    });
    if (!s) return s;
    db_sha = h.hex_digest();
    if (db_sha != manifest->db_sha256)
      return Error(Code::kInvalidArgument, "kiln.db's SHA-256 is " + db_sha + ", the manifest says " +
                                               manifest->db_sha256 + " (the file is corrupt)");
    if (::fsync(db_fd) != 0) return Error(Code::kInternal, "fsync " + tmp_db + ": " + std::strerror(errno));
    ::close(db_fd);
    db_fd = -1;
    return ok_status();
  });
  if (read && (step != 3 || !manifest_checked))
    read = Error(Code::kInvalidArgument, "the archive ends before kiln.db (the file is truncated)");
  if (!read) {
    undo();
    return fail(cmd, from + ": " + read.error().message);
  }

  Result<store::DatabaseFacts> facts = store::check_database(tmp_db);
  if (facts && facts->schema != manifest->schema)
    facts = Error(Code::kInvalidArgument, "its schema is " + facts->schema + ", the manifest says " + manifest->schema);
  if (facts && key && !key_opens(*key, facts->key_check))
    facts = Error(Code::kConflict, "the key matches the manifest's fingerprint but does not open the database's key "
                                   "check: the backup is inconsistent");
  if (!facts) {
    undo();
    return fail(cmd, from + ": the restored database: " + facts.error().message);
  }
  SystemClock clock;
  Result<std::vector<std::string>> failed_images = store::fail_images_without_files(tmp_db, clock.now_ms());
  if (!failed_images) {
    undo();
    return fail(cmd, "marking images without files: " + failed_images.error().message);
  }
  Status placed = fsync_path(tmp_db, false);
  if (placed && ::rename(tmp_db.c_str(), final_db.c_str()) != 0)
    placed = Error(Code::kInternal, "rename to " + final_db + ": " + std::strerror(errno));
  if (placed) placed = fsync_path(data_dir, true);
  if (!placed) {
    undo();
    return fail(cmd, placed.error().message);
  }
  std::cout << "restored " << from << " (kiln " << manifest->kiln_version << ", " << manifest->created_at << ", from "
            << manifest->source_data_dir << ") into " << final_db << ": " << counts_line(*facts) << "; "
            << (failed_images->empty() ? std::string("every ready image's file is in place")
                                       : std::to_string(failed_images->size()) +
                                             " image(s) marked failed, their files missing")
            << (skip_key_check ? "; key NOT checked" : "; key " + key_path + " matches") << "\n";
  return 0;
}

}  // namespace kiln
