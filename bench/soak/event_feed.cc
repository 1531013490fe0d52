#include "bench/soak/event_feed.h"

#include "bench/soak/api_values.h"
#include "common/clock.h"

namespace kiln::soak {

namespace {
constexpr int kPage = 1000;

}  // namespace

std::string Event::text(const char* key) const {
  if (!detail.is_object()) return {};
  auto it = detail.find(key);
  return it != detail.end() ? str(*it) : std::string();
}

std::optional<Event> parse_event(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("seq") || !j["seq"].is_number_integer()) return std::nullopt;
  Event e;
  e.seq = j["seq"].get<int64_t>();
  std::optional<int64_t> ts = parse_rfc3339(str(j.value("ts", nlohmann::json())));
  if (!ts) return std::nullopt;
  e.ts_ms = *ts;
  e.type = str(j.value("type", nlohmann::json()));
  e.node = str(j.value("node", nlohmann::json()));
  e.from = str(j.value("from", nlohmann::json()));
  e.to = str(j.value("to", nlohmann::json()));
  if (j.contains("detail") && j["detail"].is_object()) e.detail = j["detail"];
  return e;
}

std::optional<std::string> sequence_break(int64_t last, int64_t seq) {
  if (seq == last + 1) return std::nullopt;
  if (seq > last)
    return "seq " + std::to_string(seq) + " follows seq " + std::to_string(last) + " (" +
           std::to_string(seq - last - 1) + " never listed)";
  return "seq " + std::to_string(seq) + " listed again after seq " + std::to_string(last) + " (asked for since=" +
         std::to_string(last) + ")";
}

EventFeed::EventFeed(ApiClient& api, Findings& findings, std::string token)
    : api_(api), findings_(findings), token_(std::move(token)) {}

template <typename Sink>
bool EventFeed::read_from(int64_t since, Sink&& sink) {
  for (;;) {
    Reply r = api_.get("/v1/events?limit=" + std::to_string(kPage) + "&since=" + std::to_string(since), token_);
    if (!r.reached || r.status != 200 || !r.body.is_object() || !r.body["events"].is_array()) return false;
    const nlohmann::json& page = r.body["events"];
    for (const nlohmann::json& j : page) {
      std::optional<Event> e = parse_event(j);
      if (!e) {
        findings_.broken(invariant::kEventsGapFree, "an event kilnd listed cannot be read: " + j.dump().substr(0, 300));
        continue;
      }
      since = std::max(since, e->seq);
      sink(std::move(*e));
    }
    if (page.size() < static_cast<std::size_t>(kPage)) return true;
  }
}

std::vector<Event> EventFeed::poll() {
  std::vector<Event> out;
  read_from(last_seq_, [&](Event e) {
    if (std::optional<std::string> why = sequence_break(last_seq_, e.seq))
      findings_.broken(invariant::kEventsGapFree, *why);
    if (e.seq <= last_seq_) return;
    last_seq_ = e.seq;
    ++read_;
    out.push_back(std::move(e));
  });
  findings_.checked(invariant::kEventsGapFree, static_cast<int64_t>(out.size()));
  return out;
}

void EventFeed::reread_all() {
  int64_t expect = 1;
  int64_t count = 0;
  bool complete = read_from(0, [&](Event e) {
    ++count;
    if (e.seq != expect)
      findings_.broken(invariant::kEventsGapFree, "reading the log again from 0: seq " + std::to_string(e.seq) +
                                                      " where seq " + std::to_string(expect) + " was due");
    expect = e.seq + 1;
  });
  if (!complete) {
    findings_.broken(invariant::kEventsGapFree, "the log could not be read again from 0 at the end");
    return;
  }
  if (expect - 1 < last_seq_)
    findings_.broken(invariant::kEventsGapFree, "reading the log again from 0 ends at seq " +
                                                    std::to_string(expect - 1) + ", before seq " +
                                                    std::to_string(last_seq_) + " which was listed before");
  findings_.checked(invariant::kEventsGapFree, count);
}

}  // namespace kiln::soak
