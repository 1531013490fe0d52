#include "controller/migrate_store.h"

#include <sys/stat.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "controller/store/data_dir_lock.h"
#include "controller/store/store_copy.h"

namespace kiln {

namespace {

constexpr std::string_view kUsage =
    "usage: kilnd migrate-store --from sqlite:DIR --to postgresql://USER@HOST:PORT/DB\n"
    "  Copies the SQLite database of a stopped kilnd (DIR/kiln.db) into an empty PostgreSQL\n"
    "  database, all or nothing. --to defaults to $KILN_DATABASE. Start every kilnd on the\n"
    "  new database with --database and the same key file (DIR/kiln.key) as --key-file.\n";

int usage_error(const std::string& message) {
  std::cerr << "kilnd migrate-store: " << message << "\n";
  return 2;
}

}  // namespace

int migrate_store_main(int argc, char** argv) {
  std::string from, to;
  if (const char* env = std::getenv("KILN_DATABASE")) to = env;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view flag, std::string& out) {
      if (a == flag) {
        if (i + 1 >= argc) return false;
        out = argv[++i];
        return true;
      }
      if (a.substr(0, flag.size() + 1) == std::string(flag) + "=") {
        out = std::string(a.substr(flag.size() + 1));
        return true;
      }
      return false;
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (value("--from", from) || value("--to", to)) continue;
    return usage_error("unknown argument " + std::string(a) + " (see --help)");
  }
  if (from.empty()) return usage_error("--from is required (sqlite:DIR, the old kilnd's --data-dir)");
  if (from.rfind("sqlite:", 0) != 0) return usage_error("--from must be sqlite:DIR, got " + from);
  std::string path = from.substr(7);
  struct stat st{};
  std::string dir = path;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    path += "/kiln.db";
  } else {
    dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  }
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return usage_error("--from: no SQLite database at " + path);
  if (to.empty()) return usage_error("--to is required (postgresql://...), or set KILN_DATABASE");
  if (to.rfind("postgresql://", 0) != 0 && to.rfind("postgres://", 0) != 0)
    return usage_error("--to must be a postgresql:// URL");

  // A kilnd still running on it would keep writing after the snapshot.
  auto lock = DataDirLock::acquire(dir);
  if (!lock) {
    std::cerr << "kilnd migrate-store: " << lock.error().message << " (stop it first)\n";
    return 1;
  }
  SystemClock clock;
  auto report = copy_sqlite_to_postgres(path, to, clock);
  if (!report) {
    std::cerr << "kilnd migrate-store: " << report.error().message << "\n";
    return 1;
  }
  int64_t total = 0;
  for (const TableCopied& t : *report) {
    std::cout << t.table << "\t" << t.rows << "\n";
    total += t.rows;
  }
  std::cout << "copied " << total << " rows from " << path
            << " into PostgreSQL. Start each kilnd with --database <that URL> and --key-file set to the"
               " key of the old data dir (kiln.key beside kiln.db unless it had --key-file).\n";
  return 0;
}

}  // namespace kiln
