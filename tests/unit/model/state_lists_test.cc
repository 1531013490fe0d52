// The provision states are one list (controller/model/states.h); the copies
// others read are held to it here: the OpenAPI document's ProvisionState enum,
// the portal's fleet table (web/src/components/Fleet.tsx) and the portal's
// state colours (web/src/styles.css: every transient state shown as "in
// progress", every failed state as "failed"). The CLI links the model itself.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "controller/model/states.h"
#include "source_text.h"

using namespace kiln;

namespace {

std::vector<std::string> model_states() {
  std::vector<std::string> out;
  for (ProvisionState s : kAllProvisionStates) out.emplace_back(to_string(s));
  return out;
}

// The selectors of the one CSS rule whose selector list names `.state-<probe>`.
std::string css_rule_naming(const std::string& css, const std::string& probe) {
  const std::size_t at = css.find(".state-" + probe + ",");
  const std::size_t at_last = css.find(".state-" + probe + " {");
  const std::size_t hit = std::min(at, at_last);
  if (hit == std::string::npos) return "";
  const std::size_t begin = css.rfind('\n', hit);
  return css.substr(begin == std::string::npos ? 0 : begin, css.find('{', hit) - begin);
}

}  // namespace

TEST_CASE("provision states: the OpenAPI ProvisionState enum is the model's list", "[model][states]") {
  const std::string yaml = test::source_text("schemas/openapi.yaml");
  REQUIRE_FALSE(yaml.empty());
  const std::size_t schema = yaml.find("\n    ProvisionState:\n");
  REQUIRE(schema != std::string::npos);
  CHECK(test::list_after(yaml, yaml.find("enum:", schema)) == model_states());
}

TEST_CASE("provision states: the portal's fleet table lists the model's states in order", "[model][states]") {
  const std::string tsx = test::source_text("web/src/components/Fleet.tsx");
  REQUIRE_FALSE(tsx.empty());
  const std::size_t decl = tsx.find("const kStates = ");
  REQUIRE(decl != std::string::npos);
  CHECK(test::list_after(tsx, decl) == model_states());
}

TEST_CASE("provision states: the portal colours every transient state as in progress and every failure as failed",
          "[model][states]") {
  const std::string css = test::source_text("web/src/styles.css");
  REQUIRE_FALSE(css.empty());
  const std::string in_progress = css_rule_naming(css, "deploying");
  const std::string failed = css_rule_naming(css, "deploy_failed");
  REQUIRE_FALSE(in_progress.empty());
  REQUIRE_FALSE(failed.empty());
  for (ProvisionState s : kAllProvisionStates) {
    const std::string sel = ".state-" + std::string(to_string(s));
    INFO(sel);
    const auto names = [&](const std::string& rule) {
      return rule.find(sel + ",") != std::string::npos || rule.find(sel + " ") != std::string::npos;
    };
    CHECK(names(in_progress) == is_transient(s));
    CHECK(names(failed) == is_failed(s));
  }
}
