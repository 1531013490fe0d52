#pragma once
// ValidationStore: the reports of validation runs (sql/validations.cc),
// each tied to a node whose last_validation points at its newest.
//
// Threading and errors as NodeStore (controller/store/store.h): every method
// is safe from any thread and blocks on disk I/O.

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "controller/model/validation.h"
#include "controller/store/event_log.h"

namespace kiln {

class ValidationStore {
 public:
  virtual ~ValidationStore() = default;

  // In one transaction: inserts `record` (id filled when empty), sets the
  // node's last_validation to its id (version+1) and appends `events`.
  // kNotFound when the node is gone. Returns the record as stored.
  virtual Result<ValidationRecord> record_validation(const ValidationRecord& record,
                                                     const std::vector<EventDraft>& events) = 0;
  // Who reads. `tenant` "" reads every report (staff, and kilnd itself). A
  // tenant reads only the reports of a node it holds now that finished after
  // the node joined its allocation: finished_at > the joined_at of the
  // node's member row in the allocation the node names, while that row has
  // not left. A node's next tenant therefore never sees what was run in an
  // earlier tenant's period (the earlier tenant's timings, peers, errors),
  // nor the pool's reports from before its claim, and a tenant that gave a
  // node back sees none of its reports. finished_at, not started_at: it is
  // kilnd's clock when the report was stored, where started_at is derived
  // from the duration the agent reported. A run cannot span a claim (the
  // claim needs an unreserved node, and a run holds the reservation until
  // its report is stored), so "finished after the join" is "run for this
  // tenant". The rule is one SQL condition (store_rules::
  // tenant_report_sql) in both dialects; the node's last_validation follows it
  // (claiming a node clears it, store_rules::claimed).
  //
  // The report `id` as `tenant` may read it; kNotFound (also for a report
  // the tenant may not read, alike).
  virtual Result<ValidationRecord> get_validation(std::string_view id, std::string_view tenant) = 0;
  // The node's reports `tenant` may read, newest first; `marker` is the id of
  // the last report of the previous page ("" for the first). limit > 0.
  virtual Result<std::vector<ValidationRecord>> list_validations(std::string_view node_id, std::string_view tenant,
                                                                 int limit, std::string_view marker) = 0;
  // The newest `limit` passing reports run on nodes of `profile` and `kind`.
  virtual Result<std::vector<ValidationRecord>> recent_passing_validations(std::string_view profile,
                                                                           NodeKind kind, int limit) = 0;
};

}  // namespace kiln
