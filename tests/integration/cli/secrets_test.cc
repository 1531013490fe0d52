// The real `kiln` against a real kilnd: a BMC password reaches the node from
// standard input (--password-stdin) or the environment (KILN_BMC_PASSWORD)
// without ever being on the command line, --password still works with a
// warning, and the password is never printed back.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "cli_lab.h"
#include "tests/support/cli_run.h"

using namespace kiln::testing;
using nlohmann::json;

namespace {

// `kiln <args>` as the admin, with `env` (shell assignments, e.g.
// "KILN_BMC_PASSWORD='x'") in its environment.
KilnRun kiln_with_env(const CliLab& lab, const std::string& env, const std::string& args) {
  static int counter = 0;
  const std::string err_file = lab.dir.path() + "/secrets-stderr." + std::to_string(++counter);
  kiln::test::CommandRun r =
      kiln::test::run_command(env + " " + lab.kiln_command(args, CliLab::kAdminToken) + " 2>" + err_file);
  KilnRun out;
  out.status = r.status;
  out.out = r.out;
  std::ifstream in(err_file);
  std::stringstream buf;
  buf << in.rdbuf();
  out.err = buf.str();
  return out;
}

std::string create_args(const std::string& name) {
  return "node create --name " + name + " --profile cpu-lab --driver fake --address bmc-" + name + " -o json";
}

}  // namespace

TEST_CASE("node create takes the BMC password from stdin or KILN_BMC_PASSWORD and never prints it") {
  CliLab lab({.nodes = 0});
  const std::string admin = CliLab::kAdminToken;
  const std::string secret = "s3cret-Pa55 word";

  SECTION("--password-stdin") {
    const std::string file = lab.write("pw", secret + "\n");
    KilnRun r = lab.kiln(create_args("s1") + " --password-stdin < " + file, admin);
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(json::parse(r.out)["bmc"]["password_set"] == true);
    CHECK(lab.get("/v1/nodes/s1")["bmc"]["password_set"] == true);
    CHECK(r.out.find(secret) == std::string::npos);
    CHECK(r.err.empty());

    // The trailing newline is stripped before the password is sent: kilnd
    // takes at most 1024 characters, so 1024 and a newline is accepted and
    // 1025 is refused (by kilnd, without the value in the message).
    KilnRun at_limit = lab.kiln(create_args("s2") + " --password-stdin < " +
                                    lab.write("pw1024", std::string(1024, 'p') + "\n"),
                                admin);
    INFO(at_limit.err);
    CHECK(at_limit.status == 0);
    KilnRun over = lab.kiln(create_args("s3") + " --password-stdin < " +
                                lab.write("pw1025", std::string(1025, 'q') + "\n"),
                            admin);
    CHECK(over.status == 2);
    CHECK(over.err == "error: /bmc/password: must be at most 1024 characters\n");
  }

  SECTION("KILN_BMC_PASSWORD") {
    KilnRun r = kiln_with_env(lab, "KILN_BMC_PASSWORD='" + secret + "'", create_args("e1"));
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(json::parse(r.out)["bmc"]["password_set"] == true);
    CHECK(r.out.find(secret) == std::string::npos);
    CHECK(r.err.empty());
    // Without it (and no flag) the node has no password.
    KilnRun none = lab.kiln(create_args("e2"), admin);
    REQUIRE(none.status == 0);
    CHECK(json::parse(none.out)["bmc"]["password_set"] == false);
  }

  SECTION("--password still works, with one warning line") {
    KilnRun r = lab.kiln(create_args("p1") + " --password '" + secret + "'", admin);
    REQUIRE(r.status == 0);
    CHECK(json::parse(r.out)["bmc"]["password_set"] == true);
    CHECK(r.out.find(secret) == std::string::npos);
    CHECK(r.err ==
          "warning: --password is visible to other users in the process list; use --password-stdin or "
          "KILN_BMC_PASSWORD\n");
  }

  SECTION("usage errors: both flags, empty stdin") {
    const std::string file = lab.write("pw", secret + "\n");
    KilnRun both = lab.kiln(create_args("b1") + " --password x --password-stdin < " + file, admin);
    CHECK(both.status == 2);
    CHECK(both.err == "error: --password: give either --password or --password-stdin, not both\n");
    KilnRun empty = lab.kiln(create_args("b2") + " --password-stdin < /dev/null", admin);
    CHECK(empty.status == 2);
    CHECK(empty.err == "error: --password-stdin: standard input is empty; give the password on one line\n");
    // Neither reached kilnd.
    lab.call("GET", "/v1/nodes/b1", json(), 404);
    lab.call("GET", "/v1/nodes/b2", json(), 404);
  }

  SECTION("--help names the ways in") {
    KilnRun node_help = lab.kiln("node create --help", admin);
    CHECK(node_help.status == 0);
    CHECK(node_help.out.find("--password-stdin") != std::string::npos);
    CHECK(node_help.out.find("KILN_BMC_PASSWORD") != std::string::npos);
    KilnRun host_help = lab.kiln("host create --help", admin);
    CHECK(host_help.status == 0);
    CHECK(host_help.out.find("--password-stdin") != std::string::npos);
    CHECK(host_help.out.find("KILN_HOST_PASSWORD") != std::string::npos);
  }
}
