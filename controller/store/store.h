#pragma once
// NodeStore: Kiln's persistent state, in domain verbs: one small interface
// per aggregate, and this union of them that a store implements.
//
//   NodeRepo         nodes and ports (node_repo.h)
//   EventLog         events and audit (event_log.h)
//   AccessStore      API tokens (access_store.h)
//   CatalogueStore   images and hardware profiles (catalogue_store.h)
//   ValidationStore  validation reports (validation_store.h)
//   HostStore        hypervisor hosts and virtual machines (host_store.h)
//   AgentStore       agent boot tokens, os secrets, sessions (agent_store.h)
//   TenantStore      tenants and their quotas (tenant_store.h)
//   AllocationStore  allocations, their members, the usage ledger (allocation_store.h)
//   ConductorStore   the kilnd processes sharing the database (conductor_store.h)
//
// Code that needs one aggregate takes its interface, not the whole store.
// Two engines implement the union: SQLite (one file; the default) and
// PostgreSQL (several kilnd instances on one database). Every flow is written
// once over a small seam (controller/store/sql/sql_store.h); no SQL exists
// outside controller/store/, and what the engines spell differently stays in
// controller/store/sql/conn.h (the dialect) and the engines' own hooks. Every
// mutation is a conditional update inside one transaction.
//
// Threading: every method is safe to call from any thread. On SQLite, writes
// are serialized on one writer connection and reads use a pool of reader
// connections (WAL lets them run alongside the writer); on PostgreSQL every
// call borrows a pooled connection. Calls block on I/O, so async callers run
// them on a BlockingPool, not on I/O threads.
//
// Errors (as values): kNotFound (no such node/port/token), kConflict (duplicate
// name or MAC, with the field; failed condition), kPreconditionFailed (version
// mismatch), kUnavailable (the database cannot be reached or is locked: retry
// later), kInsufficientStorage (the disk is full), kInternal (any other
// database failure, with the engine's message).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "controller/store/access_store.h"
#include "controller/store/allocation_store.h"
#include "controller/store/agent_store.h"
#include "controller/store/catalogue_store.h"
#include "controller/store/conductor_store.h"
#include "controller/store/event_log.h"
#include "controller/store/host_store.h"
#include "controller/store/node_repo.h"
#include "controller/store/tenant_store.h"
#include "controller/store/validation_store.h"

namespace kiln {

// One value of a store's write generation (NodeStore::write_generation,
// NodeStore::database_generation). Two generations are the same write state
// only when both fields are equal; `order` alone never decides that, it only
// says which of two different ones came later (a cache keeping one answer
// per key keeps the later read's).
struct WriteGeneration {
  // SQLite: the in-memory counter. PostgreSQL: the snapshot's xmax (one past
  // the newest finished transaction id), which never goes back.
  uint64_t order = 0;
  // PostgreSQL: the whole snapshot as pg_current_snapshot() writes it
  // (xmin:xmax:xip-list); empty on SQLite, so its path allocates nothing.
  std::string snapshot;

  bool operator==(const WriteGeneration&) const = default;
};

class NodeStore : public NodeRepo,
                  public EventLog,
                  public AccessStore,
                  public CatalogueStore,
                  public ValidationStore,
                  public HostStore,
                  public AgentStore,
                  public TenantStore,
                  public AllocationStore,
                  public ConductorStore {
 public:
  ~NodeStore() override = default;

  // Applies pending migrations (schemas/sql/<dialect>, embedded at build
  // time), then places the nodes that have no ring position yet
  // (NodeRepo::power_sync_nodes says what that is for).
  virtual Status migrate() = 0;
  // Names of the migrations applied, in order ("001_initial", ...).
  virtual Result<std::vector<std::string>> applied_migrations() = 0;

  // The generation cached reads are tagged with (controller/api/read_cache.h,
  // the token cache in controller/api/auth.h): a value that changes after
  // every committed write that could change what a read of nodes, ports,
  // tokens or allocations returns, and that moves before the write's call
  // returns. A reader that reads it, then reads the store, may keep what it
  // read for as long as a later read of the generation gives the same value.
  // A store offers it one of two ways, or not at all:
  //
  // write_generation(): a counter kept in memory, engaged only where this
  // process sees every write to the database (SQLite: one kilnd per data
  // directory; moved by SQLite's update hook, not by tables no cached read
  // depends on). Non-blocking, no allocation; any thread. nullopt elsewhere.
  virtual std::optional<uint64_t> write_generation() const { return std::nullopt; }
  // database_generation(): read from the database with one round trip, where
  // other processes write too (PostgreSQL: the cluster's snapshot,
  // pg_current_snapshot(), which any commit of any instance changes, heart-
  // beats and audit rows included; a read-only statement does not).
  // has_database_generation() says, without blocking, whether it is offered;
  // database_generation() blocks on I/O (run it on a BlockingPool) and
  // returns kUnavailable when the database cannot be reached, kInternal on
  // any other failure (a caller then reads the store as if nothing were
  // kept). Stores that offer neither keep every read uncached.
  virtual bool has_database_generation() const { return false; }
  virtual Result<WriteGeneration> database_generation() {
    return Error(Code::kInternal, "this store keeps no database generation");
  }
};

struct SqliteStoreOptions {
  std::string path;          // the database file ("DIR/kiln.db")
  int reader_connections = 4;
  // How long a writer waits for SQLite's lock before failing (another process
  // holding the file, e.g. a backup). Milliseconds.
  int busy_timeout_ms = 5000;
  // Source of created_at/updated_at/event timestamps; the system clock when null.
  const Clock* clock = nullptr;
};

// Opens (creating when absent) the SQLite store. Does not migrate.
Result<std::unique_ptr<NodeStore>> open_sqlite_store(const SqliteStoreOptions& options);

}  // namespace kiln
