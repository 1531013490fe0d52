// Where a verb's secret comes from (cli/secret_flag.h): --password-stdin,
// --password (with its warning), the -f file, the environment; and the
// refusals, each one line naming the flag and never the secret.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include "cli/exit_code.h"
#include "cli/secret_flag.h"
#include "tests/support/scratch_dir.h"

using namespace kiln::cli;
using nlohmann::json;

namespace {

const SecretFlag kBmc{"password", "/bmc/password", "KILN_BMC_PASSWORD"};
const std::vector<BodyFlag> kFlags = {{"name", "/name"}, {"address", "/bmc/address"}};

// One run of body_with_secret over `words`, with `stdin_text` on standard input.
struct Run {
  std::istringstream in;
  std::ostringstream err;
  std::map<std::string, std::string> env;
  kiln::Result<json> body = json();

  Run(const std::vector<std::string>& words, std::string stdin_text,
      std::map<std::string, std::string> vars = {})
      : in(std::move(stdin_text)), env(std::move(vars)) {
    kiln::Result<Args> args = Args::parse(words);
    REQUIRE(args.ok());
    SecretInput io{&in, false,
                   [this](const char* n) -> std::optional<std::string> {
                     auto it = env.find(n);
                     if (it == env.end()) return std::nullopt;
                     return it->second;
                   },
                   &err};
    body = body_with_secret(*args, kFlags, kBmc, io);
  }
  // The one-line error as `kiln` prints it.
  std::string error() const { return one_line(body.error()); }
  // How much of standard input was consumed.
  std::streampos read_to() { return in.tellg(); }
};

}  // namespace

TEST_CASE("secret: --password-stdin reads one line and strips its newline") {
  for (const std::string& text : {"s3cr et\n", "s3cr et\r\n", "s3cr et"}) {
    Run r({"--name", "n1", "--password-stdin"}, text);
    REQUIRE(r.body.ok());
    CHECK((*r.body)["bmc"]["password"] == "s3cr et");
    CHECK((*r.body)["name"] == "n1");
    CHECK(r.err.str().empty());  // no warning, nothing echoed
  }
  // It is a switch: the next word stays a word of its own.
  Run r({"--password-stdin", "--name", "n1"}, "pw\n");
  REQUIRE(r.body.ok());
  CHECK((*r.body)["name"] == "n1");
  CHECK((*r.body)["bmc"]["password"] == "pw");
}

TEST_CASE("secret: empty, multi-line or oversize standard input is refused naming the flag") {
  for (const std::string& text : {"", "\n", "\r\n"}) {
    Run r({"--password-stdin"}, text);
    REQUIRE_FALSE(r.body.ok());
    CHECK(exit_code_for(r.body.error()) == kExitUsage);
    CHECK(r.error() == "--password-stdin: standard input is empty; give the password on one line");
  }
  Run two({"--password-stdin"}, "hunter2\nsecond line\n");
  REQUIRE_FALSE(two.body.ok());
  CHECK(two.error() == "--password-stdin: standard input must hold exactly one line");
  CHECK(two.error().find("hunter2") == std::string::npos);
  Run nul({"--password-stdin"}, std::string("hun\0ter2", 8));
  REQUIRE_FALSE(nul.body.ok());
  CHECK(nul.error() == "--password-stdin: standard input must hold exactly one line");

  Run at_limit({"--password-stdin"}, std::string(kMaxSecretBytes, 'p'));
  CHECK(at_limit.body.ok());
  Run huge({"--password-stdin"}, std::string(kMaxSecretBytes * 4, 'p'));
  REQUIRE_FALSE(huge.body.ok());
  CHECK(exit_code_for(huge.body.error()) == kExitUsage);
  CHECK(huge.error() == "--password-stdin: standard input holds more than 4096 bytes");
  // Reading stopped at the bound instead of swallowing the whole input.
  CHECK(huge.read_to() <= static_cast<std::streamoff>(kMaxSecretBytes + 1));
}

TEST_CASE("secret: --password and --password-stdin together is a usage error before stdin is read") {
  Run r({"--password", "pw", "--password-stdin"}, "other\n");
  REQUIRE_FALSE(r.body.ok());
  CHECK(exit_code_for(r.body.error()) == kExitUsage);
  CHECK(r.error() == "--password: give either --password or --password-stdin, not both");
  CHECK(r.read_to() == 0);
  CHECK(r.err.str().empty());  // no warning for a command that is refused

  Run shared({"-f", "-", "--password-stdin"}, "name: n1\n");
  REQUIRE_FALSE(shared.body.ok());
  CHECK(exit_code_for(shared.body.error()) == kExitUsage);
  CHECK(shared.error() == "--password-stdin: cannot share standard input with -f -");
  CHECK(shared.read_to() == 0);
}

TEST_CASE("secret: --password still works, with one warning line on stderr") {
  Run r({"--password", "pw-on-argv"}, "");
  REQUIRE(r.body.ok());
  CHECK((*r.body)["bmc"]["password"] == "pw-on-argv");
  CHECK(r.err.str() ==
        "warning: --password is visible to other users in the process list; use --password-stdin or "
        "KILN_BMC_PASSWORD\n");
  CHECK(r.err.str().find("pw-on-argv") == std::string::npos);
}

TEST_CASE("secret: the environment fills in only what the command line and the file leave out") {
  kiln::testing::ScratchDir dir;
  const std::string with_pw = dir.write("with.yaml", "name: n1\nbmc: {address: 'redfish://b', password: from-file}\n");
  const std::string without_pw = dir.write("without.yaml", "name: n1\nbmc: {address: 'redfish://b'}\n");
  const std::map<std::string, std::string> env = {{"KILN_BMC_PASSWORD", "from-env"}};

  Run only_env({"--name", "n1"}, "", env);
  REQUIRE(only_env.body.ok());
  CHECK((*only_env.body)["bmc"]["password"] == "from-env");
  CHECK(only_env.err.str().empty());

  Run file_without({"-f", without_pw}, "", env);
  REQUIRE(file_without.body.ok());
  CHECK((*file_without.body)["bmc"]["password"] == "from-env");
  CHECK((*file_without.body)["bmc"]["address"] == "redfish://b");

  Run file_wins({"-f", with_pw}, "", env);
  REQUIRE(file_wins.body.ok());
  CHECK((*file_wins.body)["bmc"]["password"] == "from-file");

  Run stdin_wins({"-f", with_pw, "--password-stdin"}, "from-stdin\n", env);
  REQUIRE(stdin_wins.body.ok());
  CHECK((*stdin_wins.body)["bmc"]["password"] == "from-stdin");

  Run flag_wins({"--password", "from-flag"}, "", env);
  REQUIRE(flag_wins.body.ok());
  CHECK((*flag_wins.body)["bmc"]["password"] == "from-flag");

  Run empty_env({"--name", "n1"}, "", {{"KILN_BMC_PASSWORD", ""}});
  REQUIRE(empty_env.body.ok());
  CHECK_FALSE(empty_env.body->contains("bmc"));

  Run none({"--name", "n1"}, "");
  REQUIRE(none.body.ok());
  CHECK(*none.body == json{{"name", "n1"}});

  const std::string bad_bmc = dir.write("bad.yaml", "bmc: 3\n");
  Run bad({"-f", bad_bmc, "--password-stdin"}, "pw\n");
  REQUIRE_FALSE(bad.body.ok());
  CHECK(bad.error() == "/bmc: must be an object to hold password");
}

TEST_CASE("secret: the flags a verb takes and its usage words") {
  CHECK(secret_flag_names(kBmc) == std::set<std::string>{"password", "password-stdin"});
  CHECK(secret_usage(kBmc) == "[--password-stdin | --password V]");
}
