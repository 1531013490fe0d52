#pragma once
// EventLog: the append-only history of what happened to nodes (events, with
// a strictly increasing seq the API pages by) and of who asked the API for
// what (audit). Node changes append their events in the node's own
// transaction (NodeRepo); what changes no node is appended here.
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk I/O.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln {

// An event to append in the same transaction as a node change.
struct EventDraft {
  std::string type;        // one of controller/model/event_types.h
  std::string node_id;     // filled by the store for node changes when empty
  std::string from_state;  // provision or power state before, when a transition
  std::string to_state;
  nlohmann::json detail = nlohmann::json::object();  // verb, actor, reason, step...
  std::string request_id;
  std::string tenant;      // owner at the time, so tenants can be shown their own events
};

struct EventRecord {
  int64_t seq = 0;  // strictly increasing, never reused
  int64_t ts = 0;   // ms epoch
  std::string type, node_id, from_state, to_state, request_id, tenant;
  nlohmann::json detail;
};

struct AuditRecord {
  int64_t id = 0;
  int64_t ts = 0;
  std::string actor;       // token id
  std::string actor_name;  // token name
  std::string role;
  std::string method, path, request_id, node_id;
  int status = 0;
};

class EventLog {
 public:
  virtual ~EventLog() = default;

  virtual Result<std::vector<EventRecord>> list_events(int64_t since_seq, int limit,
                                                       std::optional<std::string> node_id,
                                                       std::optional<std::string> tenant) = 0;
  virtual Result<int64_t> last_event_seq() = 0;
  // Called (outside the transaction, on the writing thread) with the highest
  // seq after every commit that appended events. One listener; set before use.
  virtual void set_event_listener(std::function<void(int64_t)> listener) = 0;
  virtual Status append_audit(const AuditRecord& record) = 0;
  virtual Result<std::vector<AuditRecord>> list_audit(int64_t since_id, int limit) = 0;

  // Appends events that change no node (agent lookups, commands, results).
  virtual Status append_events(const std::vector<EventDraft>& events) = 0;
};

}  // namespace kiln
