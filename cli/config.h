#pragma once
// Where the CLI finds kilnd and its token.
//
// Precedence, highest first: the --url/--token/--ca-file flags, then
// KILN_URL/KILN_TOKEN/KILN_CA_FILE, then a context of the config file
// (KILN_CONFIG, or ~/.config/kiln/config.yaml):
//
//   current-context: lab
//   contexts:
//     lab:  {url: "https://kiln.lab:8443", token: "...", ca_file: /etc/kiln/ca.pem}
//     prod: {url: "https://kiln.example", token: "..."}
//
// The context is --context, else KILN_CONTEXT, else current-context. A named
// context that the file lacks is an error (a typo must not silently talk to
// another controller); no file at all is fine when the URL comes from
// elsewhere. Pure function of its inputs plus one file read; any thread.

#include <functional>
#include <optional>
#include <string>

#include "common/result.h"

namespace kiln::cli {

struct Config {
  std::string url;      // "http(s)://host:port", no trailing slash
  std::string token;    // bearer token; empty: none sent
  std::string ca_file;  // PEM bundle for HTTPS; empty: the system store
  std::string context;  // which context was used, for messages
};

struct ConfigFlags {
  std::optional<std::string> url, token, ca_file, context;
};

// `env` returns a variable's value or nullopt. Errors: kInvalidArgument
// naming the flag, variable or file at fault (unreadable YAML, unknown
// context, no URL from anywhere, a URL that is not http(s)).
Result<Config> load_config(const ConfigFlags& flags,
                           const std::function<std::optional<std::string>(const char*)>& env);

}  // namespace kiln::cli
