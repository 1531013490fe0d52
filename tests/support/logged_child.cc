#include "tests/support/logged_child.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kiln::testing {

LoggedChild::LoggedChild(std::vector<std::string> argv, std::string log_path) : log_path_(std::move(log_path)) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(log_path_, ec);
  start_ = ec ? 0 : size;
  ChildSpec spec;
  spec.argv = std::move(argv);
  spec.output_file = log_path_;
  spec.parent_death_signal = SIGKILL;  // the test died: so does its child
  Result<ChildProcess> c = ChildProcess::spawn(spec);
  if (!c) throw std::runtime_error("cannot start " + spec.argv.at(0) + ": " + c.error().message);
  child_ = std::move(*c);
}

LoggedChild::~LoggedChild() { stop(); }

bool LoggedChild::running() {
  if (auto st = child_.poll()) status_ = exit_code(*st);
  return child_.running();
}

int LoggedChild::wait_exit(std::chrono::milliseconds timeout) {
  if (auto st = child_.wait(timeout)) status_ = exit_code(*st);
  return child_.running() ? -1 : status_;
}

int LoggedChild::stop(std::chrono::milliseconds grace) {
  if (auto st = child_.stop(grace)) status_ = exit_code(*st);
  return status_;
}

std::map<std::string, std::string> LoggedChild::wait_for_lines(const std::vector<std::string>& prefixes,
                                                               std::chrono::milliseconds timeout) {
  auto lines = kiln::wait_for_lines(child_, log_path_, prefixes, timeout, start_);
  if (!lines) throw std::runtime_error(lines.error().message);
  return std::move(*lines);
}

std::string LoggedChild::log() const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace kiln::testing
