#pragma once
// `kilnd migrate-store --from sqlite:DIR --to postgresql://...`: the one-time
// move of a kilnd's SQLite database into an empty PostgreSQL database
// (controller/store/store_copy.h does the copying; docs/scale-out.md is the
// procedure). Prints each table and its row count, then how to start kilnd
// on the new database.
//
// Exit status: 0 copied; 1 the copy failed (nothing was written to the
// target); 2 bad arguments. Errors are one line on stderr naming the flag or
// the table; the connection string is never printed (it may hold a password).

namespace kiln {

// argv[0] is "migrate-store".
int migrate_store_main(int argc, char** argv);

}  // namespace kiln
