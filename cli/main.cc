// kiln: the command-line client of kilnd. Parses the words, picks the
// command (command.h), builds its context and runs it; the exit code is the
// command's (exit_code.h).

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli/command.h"
#include "cli/exit_code.h"

namespace {

using namespace kiln::cli;

int terminal_width(int fd) {
  if (!::isatty(fd)) return 0;
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

void print_help(std::ostream& out) {
  out << "kiln: the command-line client of kilnd\n\n"
         "Usage: kiln COMMAND [ARGS] [FLAGS]\n\n"
         "Commands:\n";
  for (const Command& c : all_commands()) out << "  " << c.usage << "\n      " << c.summary << "\n";
  out << "\nGlobal flags:\n"
         "  --url URL          kilnd's URL (else KILN_URL, else the config file's context)\n"
         "  --token TOKEN      bearer token (else KILN_TOKEN, else the context's)\n"
         "  --ca-file FILE     PEM CA bundle for HTTPS (else KILN_CA_FILE; default: the system store)\n"
         "  --context NAME     a context of ~/.config/kiln/config.yaml (or KILN_CONFIG)\n"
         "  -o table|json|yaml|value   output format (default table)\n"
         "  -c COLUMN          show this column (repeatable); --long: every column\n"
         "  --wait, --timeout D   on verbs that start a long action: wait (default timeout 30m)\n\n"
         "Exit codes: 0 ok, 1 failed, 2 usage or bad input, 3 timed out, 4 no capacity or over quota,\n"
         "130 stopped waiting (Ctrl-C; the operation goes on).\n";
}

const Command* find_command(const std::vector<std::string>& words, std::size_t* used) {
  const Command* best = nullptr;
  for (const Command& c : all_commands()) {
    if (c.words.size() > words.size()) continue;
    bool match = true;
    for (std::size_t i = 0; i < c.words.size() && match; ++i) match = c.words[i] == words[i];
    if (match && (!best || c.words.size() > best->words.size())) best = &c;
  }
  *used = best ? best->words.size() : 0;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  kiln::Result<Args> args = Args::parse(words);
  if (!args) {
    std::cerr << "error: " << one_line(args.error()) << std::endl;
    return kExitUsage;
  }
  if (args->positional().empty()) {
    print_help(args->has("help") ? std::cout : std::cerr);
    return args->has("help") ? kExitOk : kExitUsage;
  }
  std::size_t used = 0;
  const Command* cmd = find_command(args->positional(), &used);
  if (!cmd) {
    std::cerr << "error: unknown command \"" << args->positional()[0] << "\" (see kiln --help)" << std::endl;
    return kExitUsage;
  }
  if (args->has("help")) {
    std::cout << "Usage: " << cmd->usage << "\n  " << cmd->summary << "\n";
    return kExitOk;
  }
  Context ctx;
  ctx.args = std::move(*args);
  ctx.args.consume(used);
  ctx.out = &std::cout;
  ctx.err = &std::cerr;
  ctx.in = &std::cin;
  ctx.in_tty = ::isatty(STDIN_FILENO) != 0;
  ctx.err_tty = ::isatty(STDERR_FILENO) != 0;
  ctx.width = terminal_width(STDOUT_FILENO);
  ctx.env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  };
  const std::size_t n = ctx.args.positional().size();
  if (n < cmd->min_args || n > cmd->max_args) {
    std::cerr << "error: usage: " << cmd->usage << std::endl;
    return kExitUsage;
  }
  if (kiln::Status s = ctx.args.check_flags(cmd->flags); !s) return ctx.fail(s.error());
  if (auto o = ctx.args.get("output")) {
    kiln::Result<Format> f = parse_format(*o);
    if (!f) return ctx.fail(f.error());
    ctx.output.format = *f;
  }
  ctx.output.columns = ctx.args.all("column");
  ctx.output.long_view = ctx.args.has("long");
  ctx.output.width = ctx.width;
  std::cout.flush();
  return cmd->run(ctx);
}
