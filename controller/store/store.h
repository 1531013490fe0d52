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

  // Applies pending migrations (schemas/sql/<dialect>, embedded at build time).
  virtual Status migrate() = 0;
  // Names of the migrations applied, in order ("001_initial", ...).
  virtual Result<std::vector<std::string>> applied_migrations() = 0;

  // A number that changes after every committed write that could change what
  // a read of nodes, ports, tokens or allocations returns, engaged only where
  // this process sees every write to the database (SQLite: one kilnd per data
  // directory); nullopt where others may write too (PostgreSQL: the other
  // instances), and for stores that do not keep one. It moves before the
  // write's call returns, so a reader that reads it, then reads the store,
  // may keep what it read for as long as the number has not moved
  // (controller/api/read_cache.h). Non-blocking; any thread.
  virtual std::optional<uint64_t> write_generation() const { return std::nullopt; }
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
