#pragma once
// ConductorStore: the kilnd processes (conductors) sharing this database, each
// registered with a fresh id at start and kept alive by heartbeats. The hash
// ring of the live ones decides which conductor owns which node
// (controller/conductor/membership.h); this aggregate only keeps the rows.
//
// A row is a conductor's registration: who it is (id, host, the API URL it
// serves), when it started, when it last heartbeated, and when it stopped
// (0 while it runs). Whether a conductor is *alive* is not stored: readers
// judge it from stopped_at and last_heartbeat_at against their own timeout.
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk or network I/O.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace kiln {

struct ConductorRecord {
  std::string id;       // a fresh UUID per process start
  std::string host;     // the machine's host name
  std::string api_url;  // where this conductor serves the API
  int64_t started_at = 0;
  int64_t last_heartbeat_at = 0;
  int64_t stopped_at = 0;  // 0 while running (or until it is found dead)
};

// Registrations stopped, or silent, for longer than this are deleted at the
// next registration: long past any takeover, kept only so an operator can
// see what just went away.
inline constexpr int64_t kForgetConductorAfterMs = 60 * 60 * 1000;

class ConductorStore {
 public:
  virtual ~ConductorStore() = default;

  // Registers `c` (id, host, api_url; started_at and last_heartbeat_at are
  // set to now, stopped_at to 0) and returns the row. In the same
  // transaction, earlier running registrations with the same host and
  // api_url are marked stopped (a restarted process's previous incarnation:
  // its operations are taken over at once rather than after the heartbeat
  // timeout), and registrations stopped or silent for more than
  // kForgetConductorAfterMs are deleted. Registering an id again (a
  // conductor whose row was deleted or stopped while it could not reach the
  // store) brings that row back to running with a fresh heartbeat and keeps
  // its started_at. kInvalidArgument when id is empty.
  virtual Result<ConductorRecord> register_conductor(const ConductorRecord& c) = 0;
  // Sets last_heartbeat_at = now on a running registration. kNotFound when
  // the id has no row or its row is stopped (the caller registers again).
  virtual Result<ConductorRecord> heartbeat_conductor(std::string_view id) = 0;
  // Marks the registration stopped (stopped_at = now): a clean shutdown.
  // Stopping a stopped one keeps its first stopped_at. kNotFound when absent.
  virtual Status stop_conductor(std::string_view id) = 0;
  // Every registration, by started_at then id.
  virtual Result<std::vector<ConductorRecord>> list_conductors() = 0;
};

}  // namespace kiln
