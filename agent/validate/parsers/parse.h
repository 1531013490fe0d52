#pragma once
// One entry point over every tool-output parser, so the agent and the
// `kiln-agent parse FORMAT FILE` command name formats the same way.
//
//   format        tool output                                   parser
//   nccl-tests    nccl-tests *_perf stdout                      parse_nccl_tests
//   nccl-debug    NCCL_DEBUG=INFO/TRACE log                     parse_nccl_debug
//   topo          nvidia-smi topo -m                            parse_topo
//   nvlink        nvidia-smi nvlink -s / --status               parse_nvlink
//   perftest      ib_write_bw / ib_*_bw / ib_*_lat              parse_perftest
//   dcgm          dcgmi diag -r N (text table)                  parse_dcgm
//   smi-query     nvidia-smi -q [-d ...]                        parse_smi_query
//   nvbandwidth   nvbandwidth                                   parse_nvbandwidth
//   cyclictest    cyclictest (summary, histogram or --json)     parse_cyclictest
//   gdsio         gdsio summary lines (GPUDirect Storage)       parse_gdsio
//
// Every parser is a pure function of the text: no I/O, no globals, safe to
// call from any thread. Each result is a JSON object with "format" and
// "health" (see health.h) plus the per-format facts documented in its header.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// The format names parse_tool_output() accepts, in the table's order.
const std::vector<std::string>& tool_output_formats();

// Parses `text` as `format`. Errors: kInvalidArgument when `format` is not one
// of tool_output_formats() (the message lists them) or when the text is not
// that tool's output (the parser's message says what was missing).
Result<nlohmann::json> parse_tool_output(std::string_view format, std::string_view text);

// Reads a captured output file; `path` "-" reads standard input. Errors:
// kNotFound when the file cannot be opened, kInternal on a read error.
// Blocking: call it off any I/O thread.
Result<std::string> read_capture(const std::string& path);

}  // namespace kiln::agent
