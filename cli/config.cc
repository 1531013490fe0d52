#include "cli/config.h"

#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "common/http/url.h"

namespace kiln::cli {

namespace {

std::string config_path(const std::function<std::optional<std::string>(const char*)>& env) {
  if (auto p = env("KILN_CONFIG")) return *p;
  if (auto x = env("XDG_CONFIG_HOME"); x && !x->empty()) return *x + "/kiln/config.yaml";
  if (auto h = env("HOME")) return *h + "/.config/kiln/config.yaml";
  return "";
}

std::string scalar(const YAML::Node& n, const char* key) {
  const YAML::Node v = n[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

}  // namespace

Result<Config> load_config(const ConfigFlags& flags,
                           const std::function<std::optional<std::string>(const char*)>& env) {
  Config cfg;
  std::optional<std::string> context = flags.context;
  if (!context) context = env("KILN_CONTEXT");

  const std::string path = config_path(env);
  std::error_code ec;
  if (!path.empty() && std::filesystem::exists(path, ec)) {
    YAML::Node root;
    try {
      root = YAML::LoadFile(path);
    } catch (const YAML::Exception& e) {
      return Error::invalid(path, std::string("not readable YAML: ") + e.what());
    }
    if (!context) {
      std::string current = scalar(root, "current-context");
      if (!current.empty()) context = current;
    }
    if (context) {
      const YAML::Node contexts = root["contexts"];
      const YAML::Node c = contexts && contexts.IsMap() ? contexts[*context] : YAML::Node();
      if (!c || !c.IsMap()) return Error::invalid("--context", "no context " + *context + " in " + path);
      cfg.url = scalar(c, "url");
      cfg.token = scalar(c, "token");
      cfg.ca_file = scalar(c, "ca_file");
      cfg.context = *context;
    }
  } else if (flags.context) {
    return Error::invalid("--context", "no config file " + path + " to find context " + *flags.context + " in");
  }

  if (auto v = env("KILN_URL"); v && !v->empty()) cfg.url = *v;
  if (auto v = env("KILN_TOKEN"); v && !v->empty()) cfg.token = *v;
  if (auto v = env("KILN_CA_FILE"); v && !v->empty()) cfg.ca_file = *v;
  if (flags.url) cfg.url = *flags.url;
  if (flags.token) cfg.token = *flags.token;
  if (flags.ca_file) cfg.ca_file = *flags.ca_file;

  if (cfg.url.empty())
    return Error::invalid("--url", "no kilnd URL: pass --url, set KILN_URL, or add a context to " + path);
  while (!cfg.url.empty() && cfg.url.back() == '/') cfg.url.pop_back();
  Result<http::Url> parsed = http::Url::parse(cfg.url + "/");
  if (!parsed) return Error::invalid("--url", "must be an http(s)://host:port URL: " + cfg.url);
  return cfg;
}

}  // namespace kiln::cli
