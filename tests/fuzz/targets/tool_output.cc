// The validation output parsers (agent/validate/parsers/parse.h): what
// nccl-tests, NCCL_DEBUG, nvidia-smi, perftest, dcgmi, nvbandwidth and
// cyclictest print, which a broken or hostile node controls. The first byte
// picks the format; every result that parses is an object with "format" and
// "health" that dumps to valid UTF-8.
#include <cstdint>
#include <string_view>

#include "agent/validate/parsers/parse.h"
#include "common/json_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::vector<std::string>& formats = kiln::agent::tool_output_formats();
  const std::string& format = formats[data[0] % formats.size()];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  kiln::Result<nlohmann::json> r = kiln::agent::parse_tool_output(format, text);
  if (!r) return 0;
  if (!r->is_object() || !r->contains("format") || !r->contains("health")) __builtin_trap();
  if (!kiln::is_valid_utf8(kiln::dump_json(*r))) __builtin_trap();
  return 0;
}
