#include "cli/secret_flag.h"

#include <termios.h>
#include <unistd.h>

#include <istream>
#include <ostream>

namespace kiln::cli {

namespace {

// Turns the terminal's echo off on stdin for its lifetime (a no-op when the
// terminal cannot be read or set: the line is then read as typed).
class EchoOff {
 public:
  EchoOff() {
    if (::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios quiet = saved_;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    quiet.c_lflag |= ECHONL;  // the Enter still moves to a new line
    active_ = ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0;
  }
  ~EchoOff() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
  }
  EchoOff(const EchoOff&) = delete;
  EchoOff& operator=(const EchoOff&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

// Standard input up to kMaxSecretBytes + 1 bytes (one more tells "too long").
// A terminal gives one line (the user cannot be asked for end-of-file); a pipe
// or file gives everything, so a second line is noticed rather than dropped.
std::string read_bounded(const SecretInput& io) {
  std::string text;
  std::istream& in = *io.in;
  std::optional<EchoOff> quiet;
  if (io.in_tty) {
    quiet.emplace();
    if (io.err) *io.err << "Password: " << std::flush;
  }
  for (int c = in.get(); c != std::char_traits<char>::eof(); c = in.get()) {
    text.push_back(static_cast<char>(c));
    if (text.size() > kMaxSecretBytes) break;
    if (io.in_tty && c == '\n') break;
  }
  return text;
}

Result<std::string> read_stdin_secret(const std::string& flag, const SecretInput& io) {
  const std::string name = "--" + flag + "-stdin";
  if (!io.in) return Error::invalid(name, "standard input is not available");
  std::string text = read_bounded(io);
  if (text.size() > kMaxSecretBytes)
    return Error::invalid(name, "standard input holds more than " + std::to_string(kMaxSecretBytes) + " bytes");
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty()) return Error::invalid(name, "standard input is empty; give the " + flag + " on one line");
  for (char c : text) {
    // A second line (or a stray NUL or CR) is a wrong file piped in, not a
    // password; the error never shows what was read.
    if (c == '\n' || c == '\r' || c == '\0')
      return Error::invalid(name, "standard input must hold exactly one line");
  }
  return text;
}

}  // namespace

Result<nlohmann::json> body_with_secret(const Args& args, const std::vector<BodyFlag>& flags,
                                        const SecretFlag& secret, const SecretInput& io) {
  const std::string stdin_flag = secret.flag + "-stdin";
  const bool from_stdin = args.has(stdin_flag);
  if (from_stdin && args.has(secret.flag))
    return Error::invalid("--" + secret.flag, "give either --" + secret.flag + " or --" + stdin_flag + ", not both");
  if (from_stdin && args.get("file") == "-")
    return Error::invalid("--" + stdin_flag, "cannot share standard input with -f -");

  std::optional<std::string> given;
  if (from_stdin) {
    Result<std::string> s = read_stdin_secret(secret.flag, io);
    if (!s) return s.take_error();
    given = std::move(*s);
  } else if (auto v = args.get(secret.flag)) {
    if (io.err)
      *io.err << "warning: --" << secret.flag << " is visible to other users in the process list; use --"
              << stdin_flag << " or " << secret.env << "\n";
    given = std::move(*v);
  }

  Result<nlohmann::json> body = body_from(args, flags);
  if (!body) return body;
  const nlohmann::json::json_pointer at(secret.pointer);
  if (!given && !body->contains(at) && io.env) {
    if (auto v = io.env(secret.env.c_str()); v && !v->empty()) given = std::move(*v);
  }
  if (!given) return body;
  try {
    (*body)[at] = std::move(*given);
  } catch (const nlohmann::json::exception&) {
    // The file holds a non-object where the secret's parent must be.
    return Error::invalid(at.parent_pointer().to_string(), "must be an object to hold " + secret.flag);
  }
  return body;
}

std::set<std::string> secret_flag_names(const SecretFlag& secret) {
  return {secret.flag, secret.flag + "-stdin"};
}

std::string secret_usage(const SecretFlag& secret) {
  return "[--" + secret.flag + "-stdin | --" + secret.flag + " V]";
}

}  // namespace kiln::cli
