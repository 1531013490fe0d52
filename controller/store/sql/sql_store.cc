#include "controller/store/sql/sql_store.h"

#include <algorithm>

namespace kiln {

Status SqlStore::append_tx_events(Tx& tx, const std::vector<EventDraft>& events, const Node* node,
                                  const std::string& fallback_tenant) {
  if (events.empty()) return ok_status();
  Result<int64_t> seq = insert_events(tx.conn, events, node, fallback_tenant);
  if (!seq) return seq.take_error();
  tx.appended_events = true;
  tx.last_seq = std::max(tx.last_seq, *seq);
  return ok_status();
}

}  // namespace kiln
