#pragma once
// Secrets a verb sends (a node's BMC password, a libvirt host's password)
// without needing them on the command line, where any user of the machine
// reads them in the process list (ps, /proc/PID/cmdline) and the shell keeps
// them in its history. As `docker login` does, a secret comes from, first
// match wins:
//   --password-stdin   standard input: one line, its trailing newline ("\n"
//                      or "\r\n") stripped; on a terminal it is read with the
//                      echo off
//   --password V       still accepted for old scripts, with a one-line
//                      warning on stderr that V is visible in the process list
//   -f FILE            the field in the request file, as before
//   $ENV               the verb's environment variable (KILN_BMC_PASSWORD,
//                      KILN_HOST_PASSWORD), when set and not empty: ambient,
//                      so anything this command line says wins over it
// The secret is only put in the request body; it is never printed (the API
// answers `password_set`, not the value) and never part of an error message.

#include <functional>
#include <iosfwd>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/body_flags.h"
#include "common/result.h"

namespace kiln::cli {

// Bytes read from standard input at most; kilnd takes passwords of up to
// 1024 characters, so anything near this is a wrong file, not a password.
inline constexpr std::size_t kMaxSecretBytes = 4096;

struct SecretFlag {
  std::string flag;     // "password": --password V and --password-stdin
  std::string pointer;  // where it goes in the body: "/bmc/password"
  std::string env;      // "KILN_BMC_PASSWORD"
};

// Where a secret may come from besides the words. Not owned.
struct SecretInput {
  std::istream* in = nullptr;  // standard input
  bool in_tty = false;         // stdin is a terminal: read with echo off (termios on fd 0)
  std::function<std::optional<std::string>(const char*)> env;
  std::ostream* err = nullptr;  // the --password warning
};

// body_from(args, flags) with `secret` filled in as above. The secret's flags
// are checked before the file is read, so `-f -` with --password-stdin is
// refused before either reads standard input. Errors, all kInvalidArgument
// (exit 2), one line naming the flag: --password with --password-stdin;
// --password-stdin with -f -; standard input empty (or an empty line), not
// one line, or over kMaxSecretBytes; and body_from's own.
Result<nlohmann::json> body_with_secret(const Args& args, const std::vector<BodyFlag>& flags,
                                        const SecretFlag& secret, const SecretInput& io);

// The flag names a verb with this secret accepts: --FLAG and --FLAG-stdin.
std::set<std::string> secret_flag_names(const SecretFlag& secret);

// "[--password-stdin | --password V]" for a usage line.
std::string secret_usage(const SecretFlag& secret);

}  // namespace kiln::cli
