// kiln port|image|profile|host|tenant|token|alloc|availability|usage|
// validation|events: every other resource of the API. Most are the same
// four verbs over a path (list, show, create from -f or flags, delete); the
// table below says which each has and which columns its table shows.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "cli/body_flags.h"
#include "cli/command.h"
#include "cli/duration.h"
#include "cli/exit_code.h"
#include "cli/sse.h"

namespace kiln::cli {

namespace {

using nlohmann::json;

struct Resource {
  std::string noun;     // "image"
  std::string path;     // "/v1/images"
  std::string key;      // "images"
  std::string create_verb;  // "create", "register", or "" for none
  bool can_delete = true;
  std::vector<Column> columns, wide;
  std::vector<BodyFlag> body_flags;
  // `kiln NOUN patch` where kilnd takes PATCH (a JSON Merge Patch): these
  // flags, and -f for the rest. Empty for a resource kilnd cannot change.
  std::vector<BodyFlag> patch_flags = {};
  // A secret the create verb sends (secret_flag.h): never needed on the command line.
  std::optional<SecretFlag> secret = std::nullopt;
};

const std::vector<Resource>& resources() {
  static const std::vector<Resource> r = {
      {"port", "/v1/ports", "ports", "create", true,
       {{"id", "/id"}, {"node", "/node"}, {"address", "/address"}, {"pxe", "/pxe"}},
       {{"id", "/id"}, {"node", "/node"}, {"address", "/address"}, {"pxe", "/pxe"}, {"created_at", "/created_at", true}},
       {{"node", "/node"}, {"address", "/address"}}},
      {"image", "/v1/images", "images", "register", true,
       {{"name", "/name"}, {"kind", "/kind"}, {"format", "/format"}, {"status", "/status"}, {"public", "/public"},
        {"size", "/size"}},
       {{"id", "/id"}, {"name", "/name"}, {"kind", "/kind"}, {"format", "/format"}, {"status", "/status"},
        {"public", "/public"}, {"size", "/size"}, {"sha256", "/sha256"}, {"created_at", "/created_at", true}},
       {{"name", "/name"}, {"kind", "/kind"}, {"format", "/format"}, {"source", "/source"}, {"sha256", "/sha256"},
        {"size", "/size", 'i'}, {"public", "/public", 'b'}},
       {{"public", "/public", 'b'}, {"private", "/public", 'n'}}},
      {"profile", "/v1/profiles", "profiles", "create", true,
       {{"name", "/name"}, {"description", "/description"}},
       {{"name", "/name"}, {"description", "/description"}, {"updated_at", "/updated_at", true}},
       {},
       {{"description", "/description"}}},
      {"host", "/v1/hosts", "hosts", "create", true,
       {{"name", "/name"}, {"uri", "/uri"}, {"state", "/state"}},
       {{"id", "/id"}, {"name", "/name"}, {"uri", "/uri"}, {"state", "/state"}, {"created_at", "/created_at", true}},
       {{"name", "/name"}, {"uri", "/uri"}, {"username", "/username"}},
       {},
       SecretFlag{"password", "/password", "KILN_HOST_PASSWORD"}},
      {"tenant", "/v1/tenants", "tenants", "create", true,
       {{"name", "/name"}, {"display_name", "/display_name"}, {"quotas", "/quotas"}},
       {{"name", "/name"}, {"display_name", "/display_name"}, {"quotas", "/quotas"}, {"created_at", "/created_at", true}},
       {{"name", "/name"}, {"display-name", "/display_name"}},
       {{"display-name", "/display_name"}}},
      {"token", "/v1/tokens", "tokens", "create", true,
       {{"id", "/id"}, {"name", "/name"}, {"role", "/role"}, {"tenant", "/tenant"}, {"expires_at", "/expires_at", true}},
       {{"id", "/id"}, {"name", "/name"}, {"role", "/role"}, {"tenant", "/tenant"}, {"created_at", "/created_at", true},
        {"expires_at", "/expires_at", true}},
       {{"name", "/name"}, {"role", "/role"}, {"tenant", "/tenant"}}},
  };
  return r;
}

// "an image", "a port": for the --help summaries.
std::string with_article(const std::string& noun) {
  return (std::string("aeiou").find(noun.at(0)) == std::string::npos ? "a " : "an ") + noun;
}

void add_simple(std::vector<Command>& c, const Resource& res) {
  c.push_back({{res.noun, "list"}, "kiln " + res.noun + " list", "List " + res.key, {}, 0, 0, [res](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 return print_list(ctx, api->list(res.path, res.key), res.key, res.columns, res.wide);
               }});
  c.push_back({{res.noun, "show"}, "kiln " + res.noun + " show ID", "Show one " + res.noun, {}, 1, 1,
               [res](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 return print_resource(ctx, api->get(res.path + "/" + escape(ctx.args.positional().at(0))));
               }});
  if (!res.create_verb.empty()) {
    std::string usage = "kiln " + res.noun + " " + res.create_verb + " " + flags_usage(res.body_flags);
    std::string summary = "Create " + with_article(res.noun);
    std::set<std::string> flags = flag_names(res.body_flags);
    if (res.secret) {
      usage += " " + secret_usage(*res.secret);
      summary += "; the " + res.secret->flag + " from --" + res.secret->flag + "-stdin (one line) or " +
                 res.secret->env + " (--" + res.secret->flag + " shows it in the process list)";
      flags.merge(secret_flag_names(*res.secret));
    }
    c.push_back({{res.noun, res.create_verb}, usage, summary, flags, 0, 0, [res](Context& ctx) {
                   Result<json> body = res.secret
                                           ? body_with_secret(ctx.args, res.body_flags, *res.secret, ctx.secret_input())
                                           : body_from(ctx.args, res.body_flags);
                   if (!body) return ctx.fail(body.error());
                   ApiClient* api = ctx.api();
                   if (!api) return static_cast<int>(kExitUsage);
                   return print_resource(ctx, api->post(res.path, *body));
                 }});
  }
  if (!res.patch_flags.empty()) {
    c.push_back({{res.noun, "patch"},
                 "kiln " + res.noun + " patch ID " + flags_usage(res.patch_flags, "MERGE_PATCH_FILE"),
                 "Change " + with_article(res.noun) + " (JSON Merge Patch)", flag_names(res.patch_flags), 1, 1,
                 [res](Context& ctx) {
                   return patch_resource(ctx, res.path + "/" + escape(ctx.args.positional().at(0)), res.patch_flags);
                 }});
  }
  if (res.can_delete) {
    c.push_back({{res.noun, "delete"}, "kiln " + res.noun + " delete ID", "Delete " + with_article(res.noun), {}, 1, 1,
                 [res](Context& ctx) {
                   ApiClient* api = ctx.api();
                   if (!api) return static_cast<int>(kExitUsage);
                   Result<json> r = api->del(res.path + "/" + escape(ctx.args.positional().at(0)));
                   if (!r) return ctx.fail(r.error());
                   *ctx.err << "deleted " << res.noun << " " << ctx.args.positional().at(0) << "\n";
                   return static_cast<int>(kExitOk);
                 }});
  }
}

// ---------------------------------------------------------------------------
// Allocations

const std::vector<Column> kAllocColumns = {
    {"id", "/id"},       {"name", "/name"},   {"tenant", "/tenant"}, {"profile", "/profile"},
    {"kind", "/kind"},   {"count", "/count"}, {"state", "/state"},   {"expires_at", "/expires_at", true}};
const std::vector<Column> kAllocWide = {
    {"id", "/id"},         {"name", "/name"},         {"tenant", "/tenant"},
    {"profile", "/profile"}, {"kind", "/kind"},       {"count", "/count"},
    {"image", "/image"},   {"state", "/state"},       {"replacements", "/replacements"},
    {"last_error", "/last_error"}, {"expires_at", "/expires_at", true}, {"created_at", "/created_at", true}};

// The command that resumes waiting for `ids` after Ctrl-C.
std::string alloc_wait_command(const std::vector<std::string>& ids, const std::string& goal) {
  std::string resume = "kiln alloc wait";
  for (const std::string& id : ids) resume += " " + id;
  if (goal != "ready") resume += " --state " + goal;
  return resume;
}

int create_allocation(Context& ctx) {
  std::optional<std::chrono::milliseconds> timeout = ctx.timeout();
  if (!timeout) return kExitUsage;
  Result<json> body = body_from(ctx.args, {{"name", "/name"}, {"tenant", "/tenant"}, {"profile", "/profile"},
                                      {"kind", "/kind"}, {"count", "/count", 'i'}, {"image", "/image"},
                                      {"ssh-key", "/ssh_keys", 'a'}, {"trait", "/traits", 'a'}});
  if (!body) return ctx.fail(body.error());
  if (auto lease = ctx.args.get("lease")) {
    std::optional<std::chrono::milliseconds> d = parse_duration(*lease);
    if (!d) return ctx.fail(Error::invalid("--lease", "must be a duration like 2h or 3600s"));
    (*body)["lease_seconds"] = d->count() / 1000;
  }
  if (auto f = ctx.args.get("ssh-key-file")) {
    std::ifstream in(*f);
    if (!in) return ctx.fail(Error::invalid("--ssh-key-file", "cannot read " + *f));
    std::string line;
    while (std::getline(in, line))
      if (!line.empty() && line[0] != '#') (*body)["ssh_keys"].push_back(line);
  }
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  Result<json> r = api->post("/v1/allocations", *body);
  return ctx.finish_action(r, {WaitSpec::Kind::kAllocations, {}, {"ready"}, *timeout},
                           alloc_wait_command({r ? r->value("id", "") : ""}, "ready"));
}

int release_allocation(Context& ctx) {
  std::optional<std::chrono::milliseconds> timeout = ctx.timeout();
  if (!timeout) return kExitUsage;
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  Result<json> r = api->del("/v1/allocations/" + escape(ctx.args.positional().at(0)));
  return ctx.finish_action(r, {WaitSpec::Kind::kAllocations, {}, {"released"}, *timeout},
                           alloc_wait_command({r ? r->value("id", "") : ""}, "released"));
}

// ---------------------------------------------------------------------------
// Events

const std::vector<Column> kEventColumns = {{"seq", "/seq"},   {"ts", "/ts", true}, {"type", "/type"},
                                           {"node", "/node"}, {"from", "/from"},    {"to", "/to"}};
const std::vector<Column> kEventWide = {{"seq", "/seq"}, {"ts", "/ts", true}, {"type", "/type"},
                                        {"node", "/node"}, {"from", "/from"}, {"to", "/to"},
                                        {"detail", "/detail"}, {"request_id", "/request_id"}};

// One streamed event in the chosen format, flushed at once (a pipe reader
// sees each event as it happens). json: one compact object per line (JSON
// Lines). yaml: one document per event, each opened by "---". value: the
// columns' values tab-separated. table: one aligned-by-hand line, the time as
// kilnd wrote it (a live stream has no "ago" worth showing).
void print_stream_event(Context& ctx, const SseEvent& e) {
  json j = json::parse(e.data, nullptr, false);
  if (j.is_discarded()) j = json{{"data", e.data}};  // not kilnd's JSON: still one valid item
  switch (ctx.output.format) {
    case Format::kJson:
      *ctx.out << j.dump() << std::endl;
      break;
    case Format::kYaml:
      *ctx.out << "---\n" << to_yaml(j) << std::flush;
      break;
    case Format::kValue:
      print_items(*ctx.out, json::array({j}), kEventColumns, kEventWide, ctx.output);
      *ctx.out << std::flush;
      break;
    case Format::kTable:
      *ctx.out << j.value("ts", "") << "  " << j.value("seq", 0) << "  " << j.value("type", "") << "  "
               << cell_text(j.value("node", json())) << "  " << cell_text(j.value("from", json())) << " -> "
               << cell_text(j.value("to", json())) << std::endl;
      break;
  }
}

int follow_events(Context& ctx, ApiClient& api, std::optional<int64_t> since) {
  // Runs until Ctrl-C or the process is killed: following is the point.
  boost::asio::io_context io;
  http::HttpClient client(io.get_executor());
  EventFollower follower(client, api.request_for(http::bhttp::verb::get, "/v1/events/stream"), since);
  std::function<bool(const SseEvent&)> on_event = [&](const SseEvent& e) {
    print_stream_event(ctx, e);
    return true;
  };
  std::function<void(const std::string&)> on_drop = [&](const std::string& why) {
    *ctx.err << "event stream dropped: " << why << std::endl;
  };
  boost::asio::co_spawn(io, follower.run(on_event, on_drop), boost::asio::detached);
  io.run();
  return kExitOk;
}

int events(Context& ctx) {
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  std::optional<int64_t> since;
  if (auto s = ctx.args.get("since")) {
    json n = json::parse(*s, nullptr, false);
    if (!n.is_number_integer() || n.get<int64_t>() < 0)
      return ctx.fail(Error::invalid("--since", "must be an event seq (a non-negative integer)"));
    since = n.get<int64_t>();
  }
  if (ctx.args.has("follow")) {
    // The stream has no filters: refuse them rather than stream everything.
    for (const char* f : {"node", "limit"})
      if (ctx.args.has(f)) return ctx.fail(Error::invalid(std::string("--") + f, "goes without --follow"));
    return follow_events(ctx, *api, since);
  }
  std::string path = "/v1/events?limit=" + escape(ctx.args.get("limit").value_or("100"));
  if (since) path += "&since=" + std::to_string(*since);
  if (auto n = ctx.args.get("node")) path += "&node=" + escape(*n);
  Result<json> r = api->get(path);
  return print_list(ctx, r, "events", kEventColumns, kEventWide);
}

}  // namespace

void add_resource_commands(std::vector<Command>& c) {
  for (const Resource& r : resources()) add_simple(c, r);

  c.push_back({{"alloc", "create"},
               "kiln alloc create --profile P --kind baremetal|virtual --count N --image I --ssh-key KEY... "
               "[--ssh-key-file F] [--name N] [--tenant T] [--trait T]... [--lease D] [-f FILE] [--wait [--timeout D]]",
               "Ask for N nodes of a profile, all or nothing",
               {"file", "name", "tenant", "profile", "kind", "count", "image", "ssh-key", "ssh-key-file", "trait",
                "lease", "wait", "timeout"},
               0, 0, create_allocation});
  c.push_back({{"alloc", "list"}, "kiln alloc list [--state S]", "List allocations", {"state"}, 0, 0,
               [](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 std::string path = "/v1/allocations";
                 if (auto s = ctx.args.get("state")) path += "?state=" + escape(*s);
                 return print_list(ctx, api->list(path, "allocations"), "allocations", kAllocColumns, kAllocWide);
               }});
  c.push_back({{"alloc", "show"}, "kiln alloc show ID|NAME", "Show an allocation and its nodes", {}, 1, 1,
               [](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 return print_resource(ctx, api->get("/v1/allocations/" + escape(ctx.args.positional().at(0))));
               }});
  c.push_back({{"alloc", "release"}, "kiln alloc release ID|NAME [--wait [--timeout D]]",
               "Give the nodes back (idempotent)", {"wait", "timeout"}, 1, 1, release_allocation});
  c.push_back({{"alloc", "renew"}, "kiln alloc renew ID|NAME --lease D", "Extend the lease to D from now", {"lease"},
               1, 1, [](Context& ctx) {
                 std::optional<std::string> lease = ctx.args.get("lease");
                 std::optional<std::chrono::milliseconds> d = lease ? parse_duration(*lease) : std::nullopt;
                 if (!d) return ctx.fail(Error::invalid("--lease", "must be given as a duration like 2h or 3600s"));
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 return print_resource(ctx, api->put("/v1/allocations/" + escape(ctx.args.positional().at(0)) + "/lease",
                                                     json{{"lease_seconds", d->count() / 1000}}));
               }});
  c.push_back({{"alloc", "wait"}, "kiln alloc wait ID... [--state ready|released] [--timeout D]",
               "Wait for allocations to be ready (or released)", {"state", "timeout"}, 1, 64, [](Context& ctx) {
                 std::optional<std::chrono::milliseconds> timeout = ctx.timeout();
                 if (!timeout) return static_cast<int>(kExitUsage);
                 const std::string goal = ctx.args.get("state").value_or("ready");
                 if (goal != "ready" && goal != "released")
                   return ctx.fail(Error::invalid("--state", "must be ready or released"));
                 if (!ctx.api()) return static_cast<int>(kExitUsage);
                 return ctx.wait({WaitSpec::Kind::kAllocations, ctx.args.positional(), {goal}, *timeout},
                                 alloc_wait_command(ctx.args.positional(), goal));
               }});
  c.push_back({{"availability"}, "kiln availability [--profile P]", "Free nodes, prices and measured figures per profile",
               {"profile"}, 0, 0, [](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 std::string path = "/v1/availability";
                 if (auto p = ctx.args.get("profile")) path += "?profile=" + escape(*p);
                 return print_list(ctx, api->get(path), "availability", {{"profile", "/profile"},
                                                                         {"gpus", "/gpu/count"},
                                                                         {"baremetal_free", "/kinds/baremetal/free"},
                                                                         {"virtual_free", "/kinds/virtual/free"}},
                                   {});
               }});
  c.push_back({{"usage"}, "kiln usage [--from T] [--to T] [--tenant T] [--allocation A]", "Metered usage and cost",
               {"from", "to", "tenant", "allocation"}, 0, 0, [](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 std::string q;
                 for (const char* f : {"from", "to", "tenant", "allocation"})
                   if (auto v = ctx.args.get(f)) q += (q.empty() ? "?" : "&") + std::string(f) + "=" + escape(*v);
                 return print_list(ctx, api->get("/v1/usage" + q), "usage",
                                   {{"allocation", "/allocation"}, {"node", "/node"}, {"tenant", "/tenant"},
                                    {"profile", "/profile"}, {"kind", "/kind"}, {"seconds", "/seconds"},
                                    {"cost_micros", "/cost_micros"}},
                                   {});
               }});
  c.push_back({{"validation", "list"}, "kiln validation list NODE", "A node's validation reports", {}, 1, 1,
               [](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 return print_list(ctx,
                                   api->list("/v1/nodes/" + escape(ctx.args.positional().at(0)) + "/validations",
                                             "validations"),
                                   "validations",
                                   {{"id", "/id"}, {"plan", "/plan"}, {"result", "/result"},
                                    {"phase", "/phase"}, {"started_at", "/started_at", true}},
                                   {});
               }});
  c.push_back({{"validation", "show"}, "kiln validation show ID", "One validation report", {}, 1, 1,
               [](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 return print_resource(ctx, api->get("/v1/validations/" + escape(ctx.args.positional().at(0))));
               }});
  c.push_back({{"events"}, "kiln events [--since SEQ] [--node N] [--limit N] [--follow]",
               "The event log; --follow streams it live (reconnecting where it left off); "
               "-o json is then one object per line, -o yaml one document per event",
               {"since", "node", "limit", "follow"}, 0, 0, events});
}

}  // namespace kiln::cli
