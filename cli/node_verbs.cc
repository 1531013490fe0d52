// kiln node ...: the fleet's nodes and the verbs that move them
// (PUT /v1/nodes/{id}/states/provision|power, /maintenance).

#include <ostream>

#include "cli/command.h"
#include "cli/exit_code.h"

namespace kiln::cli {

namespace {

using nlohmann::json;

const std::vector<Column> kNodeColumns = {
    {"name", "/name"},           {"provision_state", "/provision_state"}, {"power_state", "/power_state"},
    {"profile", "/profile"},     {"kind", "/kind"},                       {"maintenance", "/maintenance"},
    {"tenant", "/tenant"}};
const std::vector<Column> kNodeWide = {
    {"id", "/id"},           {"name", "/name"},         {"provision_state", "/provision_state"},
    {"step", "/provision_step"}, {"power_state", "/power_state"}, {"profile", "/profile"},
    {"kind", "/kind"},       {"maintenance", "/maintenance"}, {"tenant", "/tenant"},
    {"allocation", "/allocation"}, {"last_validation", "/last_validation"},
    {"updated_at", "/updated_at", true}};

std::string node_path(Context& ctx) { return "/v1/nodes/" + escape(ctx.args.positional().at(0)); }

int list_nodes(Context& ctx) {
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  std::string query;
  for (const char* f : {"provision_state", "profile", "tenant", "kind"}) {
    std::string flag = f;
    for (char& c : flag) c = c == '_' ? '-' : c;
    if (auto v = ctx.args.get(flag)) query += (query.empty() ? "?" : "&") + std::string(f) + "=" + escape(*v);
  }
  return print_list(ctx, api->list("/v1/nodes" + query, "nodes"), "nodes", kNodeColumns, kNodeWide);
}

// The BMC password never needs the command line (secret_flag.h).
const SecretFlag kBmcPassword{"password", "/bmc/password", "KILN_BMC_PASSWORD"};
const std::vector<BodyFlag> kNodeCreateFlags = {
    {"name", "/name"},         {"profile", "/profile"},   {"kind", "/kind"}, {"driver", "/bmc/driver"},
    {"address", "/bmc/address"}, {"username", "/bmc/username"}, {"trait", "/traits", 'a'}};

int create_node(Context& ctx) {
  Result<json> body = body_with_secret(ctx.args, kNodeCreateFlags, kBmcPassword, ctx.secret_input());
  if (!body) return ctx.fail(body.error());
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  return print_resource(ctx, api->post("/v1/nodes", *body));
}

// A provision verb, then (with --wait) until the node settles in `goal`.
std::function<int(Context&)> provision(std::string verb, std::vector<std::string> goal) {
  return [verb, goal](Context& ctx) {
    std::optional<std::chrono::milliseconds> timeout = ctx.timeout();
    if (!timeout) return static_cast<int>(kExitUsage);
    ApiClient* api = ctx.api();
    if (!api) return static_cast<int>(kExitUsage);
    json body = {{"target", verb}};
    if (auto image = ctx.args.get("image")) body["image"] = *image;
    return ctx.finish_action(api->put(node_path(ctx) + "/states/provision", body),
                             {WaitSpec::Kind::kNode, {}, goal, *timeout},
                             "kiln node wait " + ctx.args.positional().at(0));
  };
}

// Waits for the provision state to settle (in --state), or with --power for
// the power state to reach on|off.
int wait_node(Context& ctx) {
  std::optional<std::chrono::milliseconds> timeout = ctx.timeout();
  if (!timeout) return kExitUsage;
  std::optional<std::string> power = ctx.args.get("power");
  if (power && *power != "on" && *power != "off") return ctx.fail(Error::invalid("--power", "must be on or off"));
  if (power && ctx.args.has("state")) return ctx.fail(Error::invalid("--power", "goes without --state"));
  if (!ctx.api()) return kExitUsage;
  WaitSpec spec;
  spec.kind = power ? WaitSpec::Kind::kNodePower : WaitSpec::Kind::kNode;
  spec.ids = {ctx.args.positional().at(0)};
  if (power) spec.goal = {*power};
  if (auto s = ctx.args.get("state")) spec.goal = {*s};
  spec.timeout = *timeout;
  std::string resume = "kiln node wait " + ctx.args.positional().at(0);
  if (power) resume += " --power " + *power;
  return ctx.wait_and_show(spec, resume);
}

// Like `openstack baremetal node power on NODE`: the action comes first.
std::string second_node_path(Context& ctx) { return "/v1/nodes/" + escape(ctx.args.positional().at(1)); }

// With --wait, until the power state the action ends in (reboot: on) is
// reached with no action pending.
int power(Context& ctx) {
  const std::string action = ctx.args.positional().at(0);
  if (action != "on" && action != "off" && action != "reboot" && action != "soft_off")
    return ctx.fail(Error::invalid("ACTION", "must be one of on, off, reboot, soft_off"));
  std::optional<std::chrono::milliseconds> timeout = ctx.timeout();
  if (!timeout) return kExitUsage;
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  const std::string goal = action == "off" || action == "soft_off" ? "off" : "on";
  return ctx.finish_action(api->put(second_node_path(ctx) + "/states/power", json{{"target", action}}),
                           {WaitSpec::Kind::kNodePower, {}, {goal}, *timeout},
                           "kiln node wait " + ctx.args.positional().at(1) + " --power " + goal);
}

int maintenance(Context& ctx) {
  const std::string what = ctx.args.positional().at(0);
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  if (what == "set") {
    json body = json::object();
    if (auto reason = ctx.args.get("reason")) body["reason"] = *reason;
    return print_resource(ctx, api->put(second_node_path(ctx) + "/maintenance", body));
  }
  if (what == "unset") return print_resource(ctx, api->del(second_node_path(ctx) + "/maintenance"));
  return ctx.fail(Error::invalid("set|unset", "must be set or unset"));
}

}  // namespace

void add_node_commands(std::vector<Command>& c) {
  c.push_back({{"node", "list"}, "kiln node list [--provision-state S] [--profile P] [--tenant T] [--kind K]",
               "List nodes", {"provision-state", "profile", "tenant", "kind"}, 0, 0, list_nodes});
  c.push_back({{"node", "show"}, "kiln node show NODE", "Show one node", {}, 1, 1,
               [](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 return print_resource(ctx, api->get(node_path(ctx)));
               }});
  std::set<std::string> create_flags = flag_names(kNodeCreateFlags);
  create_flags.merge(secret_flag_names(kBmcPassword));
  c.push_back({{"node", "create"},
               "kiln node create (-f FILE | --name N --profile P --driver D --address A [--username U] "
               "[--password-stdin | --password P] [--kind K] [--trait T]...)",
               "Enrol a node; the BMC password from --password-stdin (one line) or KILN_BMC_PASSWORD "
               "(--password shows it in the process list)",
               create_flags, 0, 0, create_node});
  c.push_back({{"node", "patch"}, "kiln node patch NODE (-f MERGE_PATCH_FILE | --name N | --profile P)",
               "Change a node (JSON Merge Patch)", {"file", "name", "profile"}, 1, 1, [](Context& ctx) {
                 return patch_resource(ctx, node_path(ctx), {{"name", "/name"}, {"profile", "/profile"}});
               }});
  c.push_back({{"node", "delete"}, "kiln node delete NODE", "Delete a node", {}, 1, 1, [](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 Result<json> r = api->del(node_path(ctx));
                 if (!r) return ctx.fail(r.error());
                 *ctx.err << "deleted node " << ctx.args.positional().at(0) << "\n";
                 return static_cast<int>(kExitOk);
               }});
  const std::set<std::string> wait_flags = {"wait", "timeout"};
  c.push_back({{"node", "manage"}, "kiln node manage NODE [--wait [--timeout D]]", "Verify the BMC: enroll -> manageable",
               wait_flags, 1, 1, provision("manage", {"manageable"})});
  c.push_back({{"node", "inspect"}, "kiln node inspect NODE [--wait [--timeout D]]", "Inspect the hardware",
               wait_flags, 1, 1, provision("inspect", {"manageable"})});
  c.push_back({{"node", "provide"}, "kiln node provide NODE [--wait [--timeout D]]",
               "Clean and burn in, then into the pool", wait_flags, 1, 1, provision("provide", {"available"})});
  c.push_back({{"node", "deploy"}, "kiln node deploy NODE --image IMAGE [--wait [--timeout D]]",
               "Deploy an image", {"wait", "timeout", "image"}, 1, 1, provision("deploy", {"active"})});
  c.push_back({{"node", "undeploy"}, "kiln node undeploy NODE [--wait [--timeout D]]",
               "Tear down and clean, back to available", wait_flags, 1, 1, provision("undeploy", {"available"})});
  c.push_back({{"node", "abort"}, "kiln node abort NODE [--wait [--timeout D]]", "Abort the running operation",
               wait_flags, 1, 1, provision("abort", {})});
  c.push_back({{"node", "wait"}, "kiln node wait NODE [--state S | --power on|off] [--timeout D]",
               "Wait until the node settles (in S), or its power action ends (in on|off)",
               {"state", "power", "timeout"}, 1, 1, wait_node});
  c.push_back({{"node", "power"}, "kiln node power on|off|reboot|soft_off NODE [--wait [--timeout D]]",
               "Power action; --wait until the node is on (off for off, soft_off)", wait_flags, 2, 2, power});
  c.push_back({{"node", "maintenance"}, "kiln node maintenance set|unset NODE [--reason R]",
               "Set or clear maintenance", {"reason"}, 2, 2, maintenance});
  c.push_back({{"node", "inventory"}, "kiln node inventory NODE", "The node's hardware inventory", {}, 1, 1,
               [](Context& ctx) {
                 ApiClient* api = ctx.api();
                 if (!api) return static_cast<int>(kExitUsage);
                 return print_resource(ctx, api->get(node_path(ctx) + "/inventory"));
               }});
}

}  // namespace kiln::cli
