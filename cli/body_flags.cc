#include "cli/body_flags.h"

#include "cli/spec_file.h"

namespace kiln::cli {

using nlohmann::json;

Result<json> body_from(const Args& args, const std::vector<BodyFlag>& flags) {
  json body = json::object();
  if (auto f = args.get("file")) {
    Result<json> doc = read_spec_file(*f);
    if (!doc) return doc.take_error();
    if (!doc->is_object()) return Error::invalid(*f, "must hold an object");
    body = std::move(*doc);
  }
  for (const BodyFlag& f : flags) {
    json::json_pointer p(f.pointer);
    if (f.type == 'b' || f.type == 'n') {
      if (args.has(f.flag)) body[p] = f.type == 'b';
    } else if (f.type == 'a') {
      for (const std::string& v : args.all(f.flag)) body[p].push_back(v);
    } else if (auto v = args.get(f.flag)) {
      if (f.type == 'i') {
        json n = json::parse(*v, nullptr, false);
        if (!n.is_number_integer()) return Error::invalid("--" + f.flag, "must be an integer");
        body[p] = n;
      } else {
        body[p] = *v;
      }
    }
  }
  return body;
}

std::set<std::string> flag_names(const std::vector<BodyFlag>& flags) {
  std::set<std::string> out = {"file"};
  for (const BodyFlag& f : flags) out.insert(f.flag);
  return out;
}

std::string flags_usage(const std::vector<BodyFlag>& flags, const std::string& file_word) {
  std::string s = "(-f " + file_word;
  for (const BodyFlag& f : flags) s += " | --" + f.flag + (f.type == 'b' || f.type == 'n' ? "" : " V");
  return s + ")";
}

}  // namespace kiln::cli
