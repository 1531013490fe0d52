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
