#include "cli/command.h"

#include <iostream>

#include "cli/duration.h"
#include "cli/exit_code.h"

namespace kiln::cli {

ApiClient* Context::api() {
  if (api_) return api_.get();
  if (api_failed_) return nullptr;
  ConfigFlags flags{args.get("url"), args.get("token"), args.get("ca-file"), args.get("context")};
  Result<Config> cfg = load_config(flags, env);
  if (!cfg) {
    fail(cfg.error());
    api_failed_ = true;
    return nullptr;
  }
  api_ = std::make_unique<ApiClient>(std::move(*cfg));
  return api_.get();
}

int Context::fail(const Error& e) {
  *err << "error: " << one_line(e) << std::endl;
  return exit_code_for(e);
}

std::optional<std::chrono::milliseconds> Context::timeout() {
  std::optional<std::string> t = args.get("timeout");
  if (!t) return std::chrono::minutes(30);
  std::optional<std::chrono::milliseconds> d = parse_duration(*t);
  if (!d) {
    fail(Error::invalid("--timeout", "must be a duration like 90s, 30m or 1h (more than 0, at most a year)"));
    return std::nullopt;
  }
  return d;
}

int Context::wait(const WaitSpec& spec, const std::string& resume) {
  WaitResult r = wait_for(*api(), spec, *err, err_tty, width);
  if (r.interrupted) {
    *err << "stopped waiting; the operation goes on. Resume waiting with: " << resume << std::endl;
    return kExitInterrupted;
  }
  if (!r.status) return fail(r.status.error());
  return kExitOk;
}

int Context::wait_and_show(const WaitSpec& spec, const std::string& resume) {
  const int code = wait(spec, resume);
  if (code != kExitOk) return code;
  const std::string base = spec.kind == WaitSpec::Kind::kAllocations ? "/v1/allocations/" : "/v1/nodes/";
  for (const std::string& id : spec.ids) {
    if (int shown = print_resource(*this, api()->get(base + escape(id))); shown != kExitOk) return shown;
  }
  return kExitOk;
}

int Context::finish_action(const Result<nlohmann::json>& started, WaitSpec spec, const std::string& resume) {
  if (!started || !args.has("wait")) return print_resource(*this, started);
  spec.ids = {started->value("id", "")};
  return wait_and_show(spec, resume);
}

int print_list(Context& ctx, const Result<nlohmann::json>& r, const std::string& key,
               const std::vector<Column>& defaults, const std::vector<Column>& wide) {
  if (!r) return ctx.fail(r.error());
  if (ctx.output.format == Format::kJson || ctx.output.format == Format::kYaml) {
    print_one(*ctx.out, *r, ctx.output);  // the API's document as is
    return kExitOk;
  }
  const nlohmann::json items = r->contains(key) ? (*r)[key] : nlohmann::json::array();
  print_items(*ctx.out, items, defaults, wide, ctx.output);
  return kExitOk;
}

int print_resource(Context& ctx, const Result<nlohmann::json>& r) {
  if (!r) return ctx.fail(r.error());
  print_one(*ctx.out, *r, ctx.output);
  return kExitOk;
}

int patch_resource(Context& ctx, const std::string& path, const std::vector<BodyFlag>& flags) {
  Result<nlohmann::json> body = body_from(ctx.args, flags);
  if (!body) return ctx.fail(body.error());
  if (body->empty()) return ctx.fail(Error::invalid("-f", "nothing to change: give -f FILE (a merge patch) or flags"));
  ApiClient* api = ctx.api();
  if (!api) return kExitUsage;
  return print_resource(ctx, api->patch(path, *body));
}

std::string escape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

const std::vector<Command>& all_commands() {
  static const std::vector<Command> commands = [] {
    std::vector<Command> c;
    add_node_commands(c);
    add_resource_commands(c);
    add_cluster_commands(c);
    return c;
  }();
  return commands;
}

}  // namespace kiln::cli
