#pragma once
// `kilnd backup` and `kilnd restore`: the SQLite kilnd's backup, taken while
// it runs, and its restore into a new data directory (docs/operations.md is
// the procedure; PostgreSQL is backed up with pg_dump, docs/scale-out.md).
//
//   kilnd backup --data-dir DIR --to FILE [--key-file PATH] [--overwrite]
//   kilnd restore --from FILE --data-dir DIR [--key-file PATH] [--skip-key-check]
//
// FILE is a ustar archive (backup_archive.h) of manifest.json (kiln version,
// the schema's migrations, created_at, the source data dir, the key file's
// path and fingerprint, every member's size and SHA-256, row counts, the image
// files the database references), manifest.sha256 and kiln.db (an online,
// integrity-checked copy: controller/store/sqlite_backup.h).
//
// What is deliberately NOT in it: the sealing key (named by path and
// fingerprint only; whoever holds the backup must not also hold the key that
// opens its BMC passwords), image files (they can be large and are usually
// re-fetchable; a restore marks every `ready` image whose file is missing as
// `failed` instead of serving a broken file), the DHCP lease file and TLS files.
//
// Backup writes FILE.kiln-tmp-PID, fsyncs it and renames it into place (with
// link(2) when FILE must not be overwritten, so a FILE that appears meanwhile
// is not clobbered either): FILE is whole or absent. Restore checks the
// manifest's own hash, the fingerprint of the key kilnd will use (--key-file,
// $KILN_KEY_FILE, or DIR/kiln.key as kilnd finds it) and kiln.db's hash before
// the database is put in place, then runs integrity_check on it.
//
// Exit status: 0 done; 1 refused or failed (one line on stderr naming the
// problem; nothing left half-written); 2 bad arguments.

#include <string_view>

namespace kiln {

// argv[0] is "backup" / "restore".
int backup_main(int argc, char** argv);
int restore_main(int argc, char** argv);

// The text kilnd seals into the database's key_check row (015_key_check.sql)
// and opens at every start; a restore opens it too, to prove the key.
inline constexpr std::string_view kKeyCheckText = "kiln sealing key check v1";

}  // namespace kiln
