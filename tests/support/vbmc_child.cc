#include "tests/support/vbmc_child.h"

#include <stdlib.h>
#include <unistd.h>

#include <stdexcept>

namespace kiln::testing {

std::string vbmc_binary() {
  const char* over = std::getenv("KILN_VBMC_BIN_OVERRIDE");  // e.g. an ASan build
  return over ? over : KILN_VBMC_BIN;
}

VbmcChild::VbmcChild(std::vector<std::string> args, std::vector<std::string> wait_for,
                     std::chrono::milliseconds timeout) {
  char tmpl[] = "/tmp/kiln-vbmc-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  log_path_ = tmpl;
  args.insert(args.begin(), vbmc_binary());
  try {
    child_ = std::make_unique<LoggedChild>(std::move(args), log_path_);
    lines_ = child_->wait_for_lines(wait_for, timeout);
  } catch (const std::exception& e) {
    child_.reset();
    ::unlink(log_path_.c_str());
    throw std::runtime_error(std::string("kiln-vbmc did not start: ") + e.what());
  }
}

VbmcChild::~VbmcChild() {
  child_.reset();
  ::unlink(log_path_.c_str());
}

std::string VbmcChild::line(const std::string& prefix) const {
  auto it = lines_.find(prefix);
  return it == lines_.end() ? std::string() : it->second;
}

uint16_t VbmcChild::port_of(const std::string& prefix) const {
  const std::string l = line(prefix);
  const auto colon = l.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("no port in '" + l + "'");
  return static_cast<uint16_t>(std::stoi(l.substr(colon + 1)));
}

int run_vbmc_to_exit(std::vector<std::string> args) {
  args.insert(args.begin(), vbmc_binary());
  Result<ProgramOutput> r = run_program(args, std::chrono::seconds(10));
  return r ? exit_code(r->status) : -1;
}

}  // namespace kiln::testing
