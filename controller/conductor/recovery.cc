#include "controller/conductor/conductor_impl.h"

#include "common/ids.h"

namespace kiln {

asio::awaitable<Status> Conductor::Impl::recover() {
  auto nodes = co_await db.run([&] { return store.nodes_in_flight(); });
  if (!nodes) co_return nodes.take_error();
  int resumed = 0, failed = 0, power = 0;
  for (const Node& n : *nodes) {
    if (is_transient(n.provision_state)) {
      const TransientInfo& info = transient_info(n.provision_state);
      if (info.on_restart == RestartPolicy::kResume && !n.reservation.empty()) {
        std::string op_id = new_uuid();
        EventDraft ev;
        ev.type = "provision.resumed";
        ev.node_id = n.id;
        ev.from_state = ev.to_state = std::string(to_string(n.provision_state));
        ev.detail = {{"op", op_id}, {"previous_op", n.reservation}, {"step", n.provision_step}};
        std::vector<EventDraft> events = {ev};
        auto w = co_await write(n.id, held_by(n.reservation, n.provision_state),
                                [&](Node& m) {
                                  m.reservation = op_id;
                                  if (m.deadline_at == 0)
                                    m.deadline_at = clock.now_ms() + timeout_ms(m.provision_state);
                                  return ok_status();
                                }, std::move(events));
        if (w) {
          ++resumed;
          spawn_operation(op_id, n.id, std::string(to_string(n.provision_state)), "");
        }
        continue;
      }
      std::string reason = "kilnd restarted while the node was " + std::string(to_string(n.provision_state)) +
                           " (step " + n.provision_step + "); the operation was interrupted";
      const bool w = co_await fail_transient(n, "restart", reason);
      if (w) ++failed;
      continue;
    }
    // A stable node still holding a reservation was in a power action or
    // an on-demand validation (which records its step).
    EventDraft ev;
    ev.type = "power.failed";
    ev.node_id = n.id;
    ev.from_state = std::string(to_string(n.power_state));
    ev.to_state = "unknown";
    std::string reason = n.provision_step.empty()
                             ? "kilnd restarted during a power action; the power state is unknown until re-read"
                             : "kilnd restarted during an on-demand validation (step " + n.provision_step +
                                   "); no report was stored and the power state is unknown until re-read";
    ev.detail = {{"reason", reason}, {"previous_op", n.reservation}};
    std::vector<EventDraft> events = {ev};
    auto w = co_await write(n.id, held_by(n.reservation),
                            [&](Node& m) {
                              m.reservation.clear();
                              m.provision_step.clear();
                              m.target_power_state.reset();
                              m.power_state = PowerState::kUnknown;
                              m.last_error = reason;
                              return ok_status();
                            }, std::move(events));
    if (w) ++power;
  }
  log.info("recovery done", {{"resumed", std::to_string(resumed)},
                             {"failed", std::to_string(failed)},
                             {"power_cleared", std::to_string(power)}});
  co_return ok_status();
}

}  // namespace kiln
