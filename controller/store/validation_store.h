#pragma once
// ValidationStore: the reports of validation runs (issue 6; sqlite_profiles.cc),
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
  // kNotFound.
  virtual Result<ValidationRecord> get_validation(std::string_view id) = 0;
  // The node's reports, newest first; `marker` is the id of the last report
  // of the previous page ("" for the first). limit > 0.
  virtual Result<std::vector<ValidationRecord>> list_validations(std::string_view node_id, int limit,
                                                                 std::string_view marker) = 0;
  // The newest `limit` passing reports run on nodes of `profile` and `kind`.
  virtual Result<std::vector<ValidationRecord>> recent_passing_validations(std::string_view profile,
                                                                           std::string_view kind, int limit) = 0;
};

}  // namespace kiln
