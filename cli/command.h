#pragma once
// The CLI's verbs as data: each Command names its words ("node list"), its
// usage line, a summary for --help, the flags it takes, and the function that
// runs it. main.cc picks the command whose words match the longest prefix of
// the positional words and hands it a Context.
//
// A handler returns the process's exit code (exit_code.h). It prints results
// to ctx.out and messages to ctx.err; it never exits the process itself.

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "cli/args.h"
#include "cli/body_flags.h"
#include "cli/output.h"
#include "cli/secret_flag.h"
#include "cli/wait.h"

namespace kiln::cli {

struct Context {
  Args args;  // the command's own words already consumed
  OutputOptions output;
  std::ostream* out = nullptr;  // results
  std::ostream* err = nullptr;  // messages and progress
  std::istream* in = nullptr;   // standard input (-f -, --password-stdin)
  bool in_tty = false;          // standard input is a terminal
  bool err_tty = false;         // progress bars instead of lines
  int width = 0;                // terminal columns (0: not a terminal)
  std::function<std::optional<std::string>(const char*)> env;

  // Where a verb's secret may come from besides its words (secret_flag.h).
  SecretInput secret_input() const { return {in, in_tty, env, err}; }

  // The API client, built on first use from flags, environment and config
  // file (so --help and usage errors need no kilnd). Returns nullptr after
  // printing the configuration error; the handler then returns kExitUsage.
  ApiClient* api();

  // Prints "error: <one line>" and returns its exit code.
  int fail(const Error& e);
  // For a --wait: --timeout (default 30m; never infinite). nullopt after a
  // usage error was printed.
  std::optional<std::chrono::milliseconds> timeout();
  // Runs a wait and turns its result into an exit code, printing the
  // failure, or how to resume after Ctrl-C (`resume` is the command to run).
  int wait(const WaitSpec& spec, const std::string& resume);
  // wait(), and once the goal is reached prints what was waited on (the node
  // or the allocation(s) of spec.ids) as it is read again.
  int wait_and_show(const WaitSpec& spec, const std::string& resume);
  // The end of a verb that started a long action, `started` being kilnd's
  // answer (the node or allocation, with its "id"): an error is printed;
  // without --wait the answer is printed; with --wait, wait_and_show() on
  // that id, `spec` giving the kind, goal and timeout. The caller reads
  // timeout() before starting the action, so a bad --timeout starts nothing.
  int finish_action(const Result<nlohmann::json>& started, WaitSpec spec, const std::string& resume);

 private:
  std::unique_ptr<ApiClient> api_;
  bool api_failed_ = false;
};

struct Command {
  std::vector<std::string> words;  // "node", "list"
  std::string usage;               // "kiln node list [--state S]"
  std::string summary;
  std::set<std::string> flags;     // beyond the global ones
  std::size_t min_args = 0;        // positional words after the command's
  std::size_t max_args = 0;
  std::function<int(Context&)> run;
};

// Every command of the CLI, in --help order.
const std::vector<Command>& all_commands();

// Adders, one per file (resource_verbs.cc, node_verbs.cc, cluster_verbs.cc).
void add_resource_commands(std::vector<Command>& out);
void add_node_commands(std::vector<Command>& out);
void add_cluster_commands(std::vector<Command>& out);

// Helpers the verb files share.
// Prints a list answer ({"<key>": [...], ...}) in the chosen format.
int print_list(Context& ctx, const Result<nlohmann::json>& r, const std::string& key,
               const std::vector<Column>& defaults, const std::vector<Column>& wide);
int print_resource(Context& ctx, const Result<nlohmann::json>& r);
// `kiln NOUN patch ID`: PATCHes `path` with the merge patch made of -f and
// `flags` (body_flags.h) and prints the resource kilnd answers. A patch with
// nothing in it is refused naming -f, before any request.
int patch_resource(Context& ctx, const std::string& path, const std::vector<BodyFlag>& flags);
// URL-encodes one path segment or query value.
std::string escape(const std::string& s);

}  // namespace kiln::cli
