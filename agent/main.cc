// kiln-agent: the on-node agent.
//
//   parse FORMAT FILE   prints what the agent extracts from a validation tool's
//                       captured output, so an operator can check a capture by hand
//   validate ...        runs a validation plan against a profile and prints the
//                       report (exit 0 pass, 1 fail, 2 usage or bad input)
//
// The lookup/heartbeat loop is not implemented yet: without a subcommand the
// binary prints usage and exits 2.
#include <iostream>
#include <string>
#include <vector>

#include "agent/validate/checks/plan.h"
#include "agent/validate/parsers/parse.h"

namespace {

void usage(std::ostream& os) {
  os << "usage: kiln-agent parse FORMAT FILE   print the facts extracted from FILE as JSON\n"
        "                                      (FILE '-' reads standard input)\n"
        "       kiln-agent validate --plan NAME --profile FILE.json [--gpucheck PATH]\n"
        "                  [--sys-root DIR] [--proc-root DIR] [--kmsg FILE] [--nvml-library LIB]\n"
        "                  [--nvme PATH]\n"
        "                                      run a validation plan, print the report as JSON;\n"
        "                                      exit 0 when it passes, 1 when it fails\n"
        "       kiln-agent --help\n"
        "FORMAT is one of:";
  for (const auto& f : kiln::agent::tool_output_formats()) os << ' ' << f;
  os << "\nNAME is one of:";
  for (const auto& p : kiln::agent::plan_names()) os << ' ' << p;
  os << '\n';
}

int parse_command(const std::string& format, const std::string& file) {
  auto text = kiln::agent::read_capture(file);
  if (!text) {
    std::cerr << "kiln-agent: " << text.error().message << '\n';
    return 2;
  }
  auto parsed = kiln::agent::parse_tool_output(format, *text);
  if (!parsed) {
    std::cerr << "kiln-agent: " << file << ": " << parsed.error().message << '\n';
    return 2;
  }
  std::cout << parsed->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  return 0;
}

int validate_command(const std::vector<std::string>& args) {
  std::string plan, profile_path;
  kiln::agent::PlanOptions opts;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size()) {
      std::cerr << "kiln-agent: " << flag << " needs a value\n";
      usage(std::cerr);
      return 2;
    }
    const std::string& v = args[++i];
    if (flag == "--plan") plan = v;
    else if (flag == "--profile") profile_path = v;
    else if (flag == "--gpucheck") opts.gpucheck = v;
    else if (flag == "--sys-root") opts.paths.sys = v;
    else if (flag == "--proc-root") opts.paths.proc = v;
    else if (flag == "--kmsg") opts.paths.kmsg = v;
    else if (flag == "--nvml-library") opts.nvml_library = v;
    else if (flag == "--nvme") opts.nvme_path = v;
    else {
      std::cerr << "kiln-agent: unknown flag " << flag << '\n';
      usage(std::cerr);
      return 2;
    }
  }
  if (plan.empty() || profile_path.empty()) {
    std::cerr << "kiln-agent: validate needs --plan and --profile\n";
    usage(std::cerr);
    return 2;
  }
  auto text = kiln::agent::read_capture(profile_path);
  if (!text) {
    std::cerr << "kiln-agent: " << text.error().message << '\n';
    return 2;
  }
  const auto profile = nlohmann::json::parse(*text, nullptr, false);
  if (profile.is_discarded()) {
    std::cerr << "kiln-agent: " << profile_path << ": not valid JSON\n";
    return 2;
  }
  auto report = kiln::agent::run_plan(plan, profile, opts);
  if (!report) {
    std::cerr << "kiln-agent: " << report.error().message << '\n';
    return 2;
  }
  std::cout << report->dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  return (*report)["result"] == "pass" ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    usage(std::cout);
    return 0;
  }
  if (args.size() == 3 && args[0] == "parse") return parse_command(args[1], args[2]);
  if (!args.empty() && args[0] == "validate")
    return validate_command(std::vector<std::string>(args.begin() + 1, args.end()));
  usage(std::cerr);
  return 2;
}
