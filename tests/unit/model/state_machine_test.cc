// The transition table, checked exhaustively: every (state, event) pair is
// either the one row the design names or refused.
#include <catch2/catch.hpp>

#include <set>
#include <tuple>

#include "controller/model/state_machine.h"

using namespace kiln;
using S = ProvisionState;
using E = ProvisionEvent;

namespace {
const E kAllEvents[] = {E::kManage, E::kInspect, E::kProvide, E::kDeploy,
                        E::kUndeploy, E::kAbort, E::kDone, E::kFail};

// The design's transitions, written independently of the table under test.
const std::set<std::tuple<S, E, S>> kExpected = {
    {S::kEnroll, E::kManage, S::kVerifying},     {S::kVerifying, E::kDone, S::kManageable},
    {S::kVerifying, E::kFail, S::kEnroll},       {S::kVerifying, E::kAbort, S::kEnroll},
    {S::kManageable, E::kInspect, S::kInspecting}, {S::kInspecting, E::kDone, S::kManageable},
    {S::kInspecting, E::kFail, S::kInspectFailed}, {S::kInspecting, E::kAbort, S::kInspectFailed},
    {S::kManageable, E::kProvide, S::kCleaning}, {S::kCleaning, E::kDone, S::kBurningIn},
    {S::kCleaning, E::kFail, S::kCleanFailed},   {S::kCleaning, E::kAbort, S::kCleanFailed},
    {S::kBurningIn, E::kDone, S::kAvailable},    {S::kBurningIn, E::kFail, S::kQuarantined},
    {S::kBurningIn, E::kAbort, S::kCleanFailed}, {S::kAvailable, E::kDeploy, S::kDeploying},
    {S::kDeploying, E::kDone, S::kValidating},   {S::kDeploying, E::kFail, S::kDeployFailed},
    {S::kDeploying, E::kAbort, S::kDeployFailed}, {S::kValidating, E::kDone, S::kActive},
    {S::kValidating, E::kFail, S::kQuarantined}, {S::kValidating, E::kAbort, S::kDeployFailed},
    {S::kActive, E::kUndeploy, S::kCleaning},    {S::kDeployFailed, E::kUndeploy, S::kCleaning},
    {S::kAvailable, E::kManage, S::kManageable}, {S::kInspectFailed, E::kManage, S::kManageable},
    {S::kCleanFailed, E::kManage, S::kManageable}, {S::kDeployFailed, E::kManage, S::kManageable},
    {S::kQuarantined, E::kManage, S::kManageable},
};
}  // namespace

TEST_CASE("every allowed and every forbidden transition") {
  int allowed = 0;
  for (S s : kAllProvisionStates) {
    for (E e : kAllEvents) {
      auto to = next_state(s, e);
      bool expected = false;
      for (const auto& [f, ev, t] : kExpected) {
        if (f == s && ev == e) {
          expected = true;
          INFO(to_string(s) << " --" << to_string(e) << "--> expected " << to_string(t));
          REQUIRE(to.has_value());
          CHECK(*to == t);
        }
      }
      if (!expected) {
        INFO(to_string(s) << " --" << to_string(e) << "--> must be refused");
        CHECK_FALSE(to.has_value());
      } else {
        ++allowed;
      }
    }
  }
  CHECK(allowed == static_cast<int>(kExpected.size()));
  CHECK(transition_table().size() == kExpected.size());
}

TEST_CASE("every transient state can be left by done, fail and abort") {
  for (S s : kAllProvisionStates) {
    if (!is_transient(s)) continue;
    INFO(to_string(s));
    CHECK(next_state(s, E::kDone).has_value());
    CHECK(next_state(s, E::kFail) == failed_state(s));
    CHECK(next_state(s, E::kAbort).has_value());
    CHECK(transient_info(s).state == s);
  }
}

TEST_CASE("a verb's final target follows the done rows to a stable state") {
  CHECK(final_target(S::kVerifying) == S::kManageable);   // manage
  CHECK(final_target(S::kInspecting) == S::kManageable);  // inspect
  CHECK(final_target(S::kCleaning) == S::kAvailable);     // provide, undeploy
  CHECK(final_target(S::kDeploying) == S::kActive);       // deploy
  CHECK(final_target(S::kManageable) == S::kManageable);  // a stable state is its own
  for (S s : kAllProvisionStates) {
    INFO(to_string(s));
    CHECK_FALSE(is_transient(final_target(s)));  // no done cycle, no dead end
  }
}

TEST_CASE("abort never quarantines, fail of a validation does") {
  CHECK(next_state(S::kBurningIn, E::kAbort) == S::kCleanFailed);
  CHECK(next_state(S::kValidating, E::kAbort) == S::kDeployFailed);
  CHECK(failed_state(S::kBurningIn) == S::kQuarantined);
  CHECK(failed_state(S::kValidating) == S::kQuarantined);
  for (S s : kAllProvisionStates) {
    if (!is_transient(s)) continue;
    INFO(to_string(s));
    CHECK(next_state(s, E::kAbort) != S::kQuarantined);
  }
}

TEST_CASE("stable states accept no outcomes") {
  for (S s : kAllProvisionStates) {
    if (is_transient(s)) continue;
    INFO(to_string(s));
    CHECK_FALSE(next_state(s, E::kDone).has_value());
    CHECK_FALSE(next_state(s, E::kFail).has_value());
    CHECK_FALSE(next_state(s, E::kAbort).has_value());
  }
}

TEST_CASE("verbs parse, outcomes are not verbs") {
  for (const char* v : {"manage", "inspect", "provide", "deploy", "undeploy", "abort"})
    CHECK(parse_provision_verb(v).has_value());
  CHECK_FALSE(parse_provision_verb("done").has_value());
  CHECK_FALSE(parse_provision_verb("fail").has_value());
  CHECK_FALSE(parse_provision_verb("Deploy").has_value());
}

TEST_CASE("state names round-trip") {
  for (S s : kAllProvisionStates) CHECK(parse_provision_state(to_string(s)) == s);
  CHECK_FALSE(parse_provision_state("deploy failed").has_value());
}

TEST_CASE("wait states resume after restart, the others fail") {
  CHECK(transient_info(S::kVerifying).on_restart == RestartPolicy::kFail);
  CHECK(transient_info(S::kInspecting).on_restart == RestartPolicy::kFail);
  CHECK(transient_info(S::kDeploying).on_restart == RestartPolicy::kResume);
  CHECK(transient_info(S::kCleaning).on_restart == RestartPolicy::kResume);
}

TEST_CASE("allowed verbs per state name what the API will accept") {
  auto v = allowed_verbs(S::kAvailable);
  CHECK(v.size() == 2);
  CHECK(allowed_verbs(S::kActive) == std::vector<E>{E::kUndeploy});
  CHECK(allowed_verbs(S::kEnroll) == std::vector<E>{E::kManage});
}
