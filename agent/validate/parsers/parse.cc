#include "agent/validate/parsers/parse.h"

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "agent/validate/parsers/cyclictest.h"
#include "agent/validate/parsers/dcgm.h"
#include "agent/validate/parsers/gdsio.h"
#include "agent/validate/parsers/nccl_debug.h"
#include "agent/validate/parsers/nccl_tests.h"
#include "agent/validate/parsers/nvbandwidth.h"
#include "agent/validate/parsers/nvlink.h"
#include "agent/validate/parsers/perftest.h"
#include "agent/validate/parsers/smi_query.h"
#include "agent/validate/parsers/topo.h"

namespace kiln::agent {

namespace {

using Parser = Result<nlohmann::json> (*)(std::string_view);

struct Entry {
  const char* name;
  Parser parse;
};

constexpr Entry kParsers[] = {
    {"nccl-tests", &parse_nccl_tests}, {"nccl-debug", &parse_nccl_debug}, {"topo", &parse_topo},
    {"nvlink", &parse_nvlink},         {"perftest", &parse_perftest},     {"dcgm", &parse_dcgm},
    {"smi-query", &parse_smi_query},   {"nvbandwidth", &parse_nvbandwidth}, {"cyclictest", &parse_cyclictest},
    {"gdsio", &parse_gdsio},
};

}  // namespace

const std::vector<std::string>& tool_output_formats() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& e : kParsers) v.emplace_back(e.name);
    return v;
  }();
  return names;
}

Result<nlohmann::json> parse_tool_output(std::string_view format, std::string_view text) {
  for (const auto& e : kParsers) {
    if (format != e.name) continue;
    // The parsers check types before every access; nlohmann::json throws on a
    // mistake, so a bug becomes an error value here rather than a crash.
    try {
      return e.parse(text);
    } catch (const std::exception& ex) {
      return Error(Code::kInternal, std::string(e.name) + " parser failed: " + ex.what());
    }
  }
  std::string known;
  for (const auto& e : kParsers) known += (known.empty() ? "" : ", ") + std::string(e.name);
  return Error(Code::kInvalidArgument, "unknown format '" + std::string(format) + "' (known: " + known + ")");
}

Result<std::string> read_capture(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    if (std::cin.bad()) return Error(Code::kInternal, "error reading standard input");
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(Code::kNotFound, "cannot open " + path + ": " + std::strerror(errno));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Error(Code::kInternal, "error reading " + path);
  return data;
}

}  // namespace kiln::agent
