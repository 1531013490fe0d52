// The profiles shipped in schemas/profiles (profile_input.h): kept apart from
// the document checks so those build without the embedded files (the fuzzer).

#include "controller/api/profile_input.h"

namespace kiln::api {

// Generated from schemas/profiles/*.json (controller/api/embed_profiles.cmake).
extern const char* const kEmbeddedProfiles[];
extern const std::size_t kEmbeddedProfileCount;

using nlohmann::json;

std::vector<Profile> default_profiles(std::vector<std::string>* errors) {
  std::vector<Profile> out;
  for (std::size_t i = 0; i < kEmbeddedProfileCount; ++i) {
    json doc = json::parse(kEmbeddedProfiles[i], nullptr, false);
    Status ok = doc.is_discarded() ? Status(Error(Code::kInvalidArgument, "not valid JSON")) : check_profile_doc(doc);
    if (!ok) {
      if (errors) errors->push_back("default profile #" + std::to_string(i) + ": " + ok.error().message);
      continue;
    }
    Profile p;
    p.name = doc["name"].get<std::string>();
    p.doc = std::move(doc);
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<std::string>> seed_default_profiles(NodeStore& store) {
  return store.seed_profiles(default_profiles());
}

}  // namespace kiln::api
