// kiln cluster up|down|list|show: test clusters for CI, one allocation per
// spec group, named <cluster>-<group> (<cluster>--<group> when the group's
// name has a '-'; cluster_spec.h).
//
// `up` is idempotent and never leaks what it made: it looks up the live
// allocations by name first and creates only the missing groups; if a
// creation is refused, a group fails, or --timeout passes, it releases the
// allocations *this run* created (never ones an earlier run made) before
// exiting 4, 1 or 3. Ctrl-C only stops the waiting: the allocations carry on,
// and their lease (lease_seconds) is what bounds a job that died.

#include <iostream>
#include <map>

#include "cli/cluster_files.h"
#include "cli/cluster_spec.h"
#include "cli/command.h"
#include "cli/exit_code.h"
#include "cli/spec_file.h"

namespace kiln::cli {

namespace {

using nlohmann::json;

std::string str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// The live allocations (anything not released) of the cluster, by name.
Result<std::map<std::string, json>> live_allocations(ApiClient& api, const std::string& cluster,
                                                     const std::optional<std::string>& tenant) {
  std::string path = "/v1/allocations";
  if (tenant) path += "?tenant=" + escape(*tenant);
  Result<json> all = api.list(path, "allocations");
  if (!all) return all.take_error();
  std::map<std::string, json> out;
  for (json& a : (*all)["allocations"]) {
    const std::string name = str(a, "name");
    const std::optional<ClusterPart> part = split_allocation_name(name);
    if (str(a, "state") == "released" || !part || part->cluster != cluster) continue;
    out[name] = std::move(a);
  }
  return out;
}

std::string overall_state(const std::vector<json>& allocations) {
  bool all_ready = !allocations.empty();
  std::string worst;
  for (const json& a : allocations) {
    const std::string s = str(a, "state");
    if (s != "ready") all_ready = false;
    if (s == "failed") return "failed";
    if (s == "releasing") worst = "releasing";
    else if (s == "provisioning" && worst != "releasing") worst = "provisioning";
    else if (worst.empty()) worst = s;
  }
  return all_ready ? "ready" : worst;
}

// The group an allocation of a cluster serves (its name less the cluster's).
std::string group_of(const json& allocation) {
  const std::optional<ClusterPart> part = split_allocation_name(str(allocation, "name"));
  return part ? part->group : std::string();
}

json cluster_view(const std::string& name, const std::vector<json>& allocations) {
  json groups = json::array();
  for (const json& a : allocations) {
    const std::string an = str(a, "name");
    groups.push_back({{"group", group_of(a)}, {"allocation", a.value("id", "")},
                      {"name", an}, {"state", a.value("state", "")}, {"profile", a.value("profile", "")},
                      {"kind", a.value("kind", "")}, {"count", a.value("count", 0)},
                      {"expires_at", a.value("expires_at", json())}, {"last_error", a.value("last_error", json())},
                      {"nodes", a.value("nodes", json::array())}});
  }
  return {{"name", name}, {"state", overall_state(allocations)}, {"groups", std::move(groups)}};
}

int print_cluster(Context& ctx, const json& view) {
  if (ctx.output.format == Format::kJson || ctx.output.format == Format::kYaml) {
    print_one(*ctx.out, view, ctx.output);
    return kExitOk;
  }
  json rows = json::array();
  for (const json& g : view["groups"]) {
    if (g["nodes"].empty()) {
      rows.push_back({{"group", g["group"]}, {"allocation", g["name"]}, {"state", g["state"]}});
    }
    for (const json& n : g["nodes"])
      rows.push_back({{"group", g["group"]}, {"allocation", g["name"]}, {"state", g["state"]},
                      {"node", n.value("name", json())}, {"node_state", n.value("state", json())},
                      {"step", n.value("step", json())}});
  }
  const std::vector<Column> cols = {{"group", "/group"}, {"allocation", "/allocation"}, {"state", "/state"},
                                    {"node", "/node"}, {"node_state", "/node_state"}, {"step", "/step"}};
  print_items(*ctx.out, rows, cols, {}, ctx.output);
  return kExitOk;
}

// Releases what this run created; says so on stderr.
void release_created(Context& ctx, ApiClient& api, const std::vector<std::string>& created) {
  for (const std::string& id : created) {
    Result<json> r = api.del("/v1/allocations/" + escape(id));
    if (!r) *ctx.err << "error: could not release allocation " << id << ": " << one_line(r.error()) << std::endl;
    else *ctx.err << "released allocation " << id << " (created by this run)" << std::endl;
  }
}

Result<std::vector<ClusterNode>> gather_nodes(ApiClient& api, const ClusterSpec& spec,
                                              const std::map<std::string, json>& by_group) {
  std::vector<ClusterNode> out;
  std::map<std::string, int64_t> gpus_of;  // "profile/kind" -> GPUs per node
  for (const ClusterGroup& g : spec.groups) {
    const json& alloc = by_group.at(g.name);
    const std::string key = g.profile + "/" + g.kind;
    if (!gpus_of.count(key)) {
      Result<json> p = api.get("/v1/profiles/" + escape(g.profile));
      if (!p) return p.take_error();
      const json::json_pointer ptr(g.kind == "virtual" ? "/virtual/gpus" : "/gpu/count");
      gpus_of[key] = p->contains(ptr) && p->at(ptr).is_number_integer() ? p->at(ptr).get<int64_t>() : 0;
    }
    for (const json& member : alloc.value("nodes", json::array())) {
      Result<json> n = api.get("/v1/nodes/" + escape(str(member, "id")));
      if (!n) return n.take_error();
      ClusterNode cn;
      cn.id = str(*n, "id");
      cn.name = str(*n, "name");
      cn.group = g.name;
      cn.profile = g.profile;
      cn.kind = g.kind;
      cn.gpus = gpus_of[key];
      // Reported by the OS-phase agent once kilnd records it; absent until then.
      if (n->contains("addresses") && (*n)["addresses"].is_array())
        for (const json& a : (*n)["addresses"]) {
          if (a.is_string()) cn.addresses.push_back(a.get<std::string>());
          else if (a.is_object() && a.contains("address") && a["address"].is_string())
            cn.addresses.push_back(a["address"].get<std::string>());
        }
      cn.ssh = str(*n, "ssh");
      // Posted by the OS's cloud-init phone_home; checked by the writer.
      if (n->contains("ssh_host_keys") && (*n)["ssh_host_keys"].is_array())
        for (const json& k : (*n)["ssh_host_keys"])
          if (k.is_object()) cn.ssh_host_keys.emplace_back(str(k, "type"), str(k, "key"));
      out.push_back(std::move(cn));
    }
  }
  return out;
}

int write_files(Context& ctx, ApiClient& api, const ClusterSpec& spec, const std::string& dir,
                const std::optional<std::string>& tenant) {
  std::map<std::string, json> by_group;
  json groups = json::array();
  std::vector<std::string> names;
  for (const ClusterGroup& g : spec.groups) {
    // With --tenant (a staff token) the reference is tenant/name: a bare name
    // another tenant also uses is a 409, and must never be another tenant's
    // cluster written into these files.
    const std::string ref = (tenant ? *tenant + "/" : std::string()) + spec.allocation_name(g);
    Result<json> a = api.get("/v1/allocations/" + escape(ref));
    if (!a) return ctx.fail(a.error());
    by_group[g.name] = *a;
    names.push_back(g.name);
    groups.push_back({{"name", g.name}, {"allocation", a->value("id", "")}, {"profile", g.profile},
                      {"kind", g.kind}, {"count", g.count}, {"image", g.image}});
  }
  Result<std::vector<ClusterNode>> nodes = gather_nodes(api, spec, by_group);
  if (!nodes) return ctx.fail(nodes.error());
  int without = 0, unpinned = 0;
  for (const ClusterNode& n : *nodes) {
    without += n.addresses.empty() ? 1 : 0;
    unpinned += !n.addresses.empty() && n.ssh_host_keys.empty() ? 1 : 0;
  }
  if (Status s = write_cluster_files(dir, spec.name, groups, names, *nodes); !s) return ctx.fail(s.error());
  *ctx.err << "wrote " << dir << "/{cluster.json,hostfile,ssh_config,inventory.ini,known_hosts}" << std::endl;
  if (unpinned > 0)
    *ctx.err << "warning: " << unpinned << " of " << nodes->size()
             << " nodes have not reported SSH host keys; ssh_config does not pin host keys (ssh will ask)"
             << std::endl;
  if (without > 0)
    *ctx.err << "warning: " << without << " of " << nodes->size()
             << " nodes have no address reported by kilnd yet; they are listed in cluster.json only" << std::endl;
  return kExitOk;
}

int cluster_up(Context& ctx) {
  std::optional<std::string> file = ctx.args.get("file");
  if (!file) return ctx.fail(Error::invalid("-f", "is required: the cluster spec (YAML or JSON)"));
  Result<json> doc = read_spec_file(*file);
  if (!doc) return ctx.fail(doc.error());
  Result<ClusterSpec> parsed = parse_cluster_spec(*doc);
  if (!parsed) return ctx.fail(parsed.error());
  const ClusterSpec& spec = *parsed;
  std::optional<std::chrono::milliseconds> timeout = ctx.timeout();
  if (!timeout) return kExitUsage;
  const std::string dir = ctx.args.get("output-dir").value_or("./" + spec.name);
  const std::optional<std::string> tenant = ctx.args.get("tenant");
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;

  Result<std::map<std::string, json>> live = live_allocations(*api, spec.name, tenant);
  if (!live) return ctx.fail(live.error());
  std::vector<std::string> created;
  std::vector<std::string> ids;
  for (const ClusterGroup& g : spec.groups) {
    const std::string name = spec.allocation_name(g);
    if (auto it = live->find(name); it != live->end()) {
      const std::string state = str(it->second, "state");
      if (state == "failed" || state == "releasing") {
        release_created(ctx, *api, created);
        const std::string why = str(it->second, "last_error");
        return ctx.fail(Error(Code::kConflict, "group " + g.name + ": allocation " + name + " is " + state +
                                                   (why.empty() ? "" : " (" + why + ")") + "; run `kiln cluster down " +
                                                   spec.name + " --wait` first"));
      }
      if (str(it->second, "profile") != g.profile || str(it->second, "kind") != g.kind ||
          it->second.value("count", int64_t{0}) != g.count)
        *ctx.err << "warning: group " << g.name << ": the live allocation " << name
                 << " differs from the spec (profile, kind or count); kept as it is" << std::endl;
      *ctx.err << "group " << g.name << ": allocation " << name << " exists (" << state << "); nothing created"
               << std::endl;
      ids.push_back(str(it->second, "id"));
      continue;
    }
    json body = {{"name", name}, {"profile", g.profile}, {"kind", g.kind}, {"count", g.count},
                 {"image", g.image},  {"ssh_keys", spec.ssh_keys}};
    if (!g.traits.empty()) body["traits"] = g.traits;
    if (spec.lease_seconds) body["lease_seconds"] = *spec.lease_seconds;
    if (spec.user_data) body["user_data"] = *spec.user_data;
    if (tenant) body["tenant"] = *tenant;
    Result<json> r = api->post("/v1/allocations", body);
    if (!r) {
      *ctx.err << "error: group " << g.name << ": " << one_line(r.error()) << std::endl;
      release_created(ctx, *api, created);
      return exit_code_for(r.error());
    }
    created.push_back(str(*r, "id"));
    ids.push_back(str(*r, "id"));
    *ctx.err << "group " << g.name << ": created allocation " << name << " (" << str(*r, "id") << ")" << std::endl;
  }
  if (created.empty()) *ctx.err << "cluster " << spec.name << " exists; nothing created" << std::endl;

  if (ctx.args.has("wait")) {
    WaitSpec w;
    w.ids = ids;
    w.goal = {"ready"};
    w.timeout = *timeout;
    WaitResult r = wait_for(*api, w, *ctx.err, ctx.err_tty, ctx.width);
    if (r.interrupted) {
      *ctx.err << "stopped waiting; the cluster goes on (its lease still applies). Resume waiting with: kiln cluster up -f "
               << *file << " --wait" << std::endl;
      return kExitInterrupted;
    }
    if (!r.status) {
      const int code = ctx.fail(r.status.error());
      release_created(ctx, *api, created);
      return code;
    }
  }
  Result<std::map<std::string, json>> now = live_allocations(*api, spec.name, tenant);
  if (!now) return ctx.fail(now.error());
  std::vector<json> allocations;
  for (const ClusterGroup& g : spec.groups)
    if (auto it = now->find(spec.allocation_name(g)); it != now->end()) allocations.push_back(it->second);
  const json view = cluster_view(spec.name, allocations);
  if (view["state"] == "ready") {
    if (int code = write_files(ctx, *api, spec, dir, tenant); code != kExitOk) return code;
  } else {
    *ctx.err << "cluster " << spec.name << " is " << view["state"].get<std::string>()
             << "; the files are written once it is ready (run this again with --wait)" << std::endl;
  }
  return print_cluster(ctx, view);
}

int cluster_down(Context& ctx) {
  std::optional<std::chrono::milliseconds> timeout = ctx.timeout();
  if (!timeout) return kExitUsage;
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  const std::string name = ctx.args.positional().at(0);
  Result<std::map<std::string, json>> live = live_allocations(*api, name, ctx.args.get("tenant"));
  if (!live) return ctx.fail(live.error());
  if (live->empty()) {
    *ctx.err << "cluster " << name << ": nothing to release (unknown, or already released)" << std::endl;
    return kExitOk;
  }
  std::vector<std::string> ids;
  for (const auto& entry : *live) {
    const std::string id = str(entry.second, "id");
    Result<json> r = api->del("/v1/allocations/" + escape(id));
    if (!r) return ctx.fail(r.error());
    *ctx.err << "releasing allocation " << entry.first << " (" << id << ")" << std::endl;
    ids.push_back(id);
  }
  if (!ctx.args.has("wait")) return kExitOk;
  WaitSpec w;
  w.ids = ids;
  w.goal = {"released"};
  w.timeout = *timeout;
  return ctx.wait(w, "kiln cluster down " + name + " --wait");
}

int cluster_list(Context& ctx) {
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  std::string path = "/v1/allocations";
  if (auto t = ctx.args.get("tenant")) path += "?tenant=" + escape(*t);
  Result<json> all = api->list(path, "allocations");
  if (!all) return ctx.fail(all.error());
  std::map<std::string, std::vector<json>> clusters;
  for (const json& a : (*all)["allocations"]) {
    const std::optional<ClusterPart> part = split_allocation_name(str(a, "name"));
    if (part && str(a, "state") != "released") clusters[part->cluster].push_back(a);
  }
  json items = json::array();
  for (const auto& entry : clusters) {
    int64_t nodes = 0;
    json groups = json::array();
    json expires;
    for (const json& a : entry.second) {
      nodes += a.value("count", int64_t{0});
      groups.push_back(group_of(a));
      if (a.contains("expires_at") && a["expires_at"].is_string() &&
          (expires.is_null() || a["expires_at"].get<std::string>() < expires.get<std::string>()))
        expires = a["expires_at"];
    }
    items.push_back({{"name", entry.first}, {"state", overall_state(entry.second)}, {"groups", groups},
                     {"nodes", nodes}, {"expires_at", expires}});
  }
  if (ctx.output.format == Format::kJson || ctx.output.format == Format::kYaml) {
    print_one(*ctx.out, json{{"clusters", items}}, ctx.output);
    return kExitOk;
  }
  print_items(*ctx.out, items,
              {{"name", "/name"}, {"state", "/state"}, {"groups", "/groups"}, {"nodes", "/nodes"},
               {"expires_at", "/expires_at", true}},
              {}, ctx.output);
  return kExitOk;
}

int cluster_show(Context& ctx) {
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  const std::string name = ctx.args.positional().at(0);
  Result<std::map<std::string, json>> live = live_allocations(*api, name, ctx.args.get("tenant"));
  if (!live) return ctx.fail(live.error());
  if (live->empty()) return ctx.fail(Error(Code::kNotFound, "no live cluster named " + name));
  std::vector<json> allocations;
  for (const auto& entry : *live) {
    // The list view has the members already; show reads each for the freshest state.
    Result<json> a = api->get("/v1/allocations/" + escape(str(entry.second, "id")));
    if (!a) return ctx.fail(a.error());
    allocations.push_back(*a);
  }
  return print_cluster(ctx, cluster_view(name, allocations));
}

}  // namespace

void add_cluster_commands(std::vector<Command>& c) {
  c.push_back({{"cluster", "up"}, "kiln cluster up -f cluster.yaml [--wait] [--timeout D] [--output-dir DIR] [--tenant T]",
               "Stand up a test cluster (idempotent); with --wait, write DIR/{cluster.json,hostfile,ssh_config,inventory.ini}",
               {"file", "wait", "timeout", "output-dir", "tenant"}, 0, 0, cluster_up});
  c.push_back({{"cluster", "down"}, "kiln cluster down NAME [--wait [--timeout D]] [--tenant T]",
               "Release every allocation of the cluster (idempotent)", {"wait", "timeout", "tenant"}, 1, 1,
               cluster_down});
  c.push_back({{"cluster", "list"}, "kiln cluster list [--tenant T]", "Live clusters", {"tenant"}, 0, 0, cluster_list});
  c.push_back({{"cluster", "show"}, "kiln cluster show NAME [--tenant T]", "A cluster's groups and nodes", {"tenant"},
               1, 1, cluster_show});
}

}  // namespace kiln::cli
