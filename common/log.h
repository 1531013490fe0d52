#pragma once
// Logging facade: one line per record, `ts level msg key=value ...`.
//
// Loggers are passed in (never global); a Logger is cheap to copy and carries
// fixed fields (component, request id, node id) added with with(). Values are
// quoted when they contain spaces. Never pass a secret as a field: there is no
// redaction here, the rule is enforced by code review and a test that greps logs.

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Parses "debug|info|warn|error|off"; returns false on anything else.
bool parse_log_level(std::string_view s, LogLevel* out);

// Where lines go. The default sink writes to stderr under a mutex.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void write(std::string_view line) = 0;
};

class Logger {
 public:
  using Field = std::pair<std::string, std::string>;

  // A logger writing to stderr at `level`.
  explicit Logger(LogLevel level = LogLevel::kInfo);
  Logger(std::shared_ptr<LogSink> sink, LogLevel level);

  // A copy with extra fixed fields appended to every line.
  Logger with(std::string key, std::string value) const;

  bool enabled(LogLevel l) const { return l >= level_; }
  void log(LogLevel l, std::string_view msg, std::initializer_list<Field> fields = {}) const;
  void debug(std::string_view m, std::initializer_list<Field> f = {}) const { log(LogLevel::kDebug, m, f); }
  void info(std::string_view m, std::initializer_list<Field> f = {}) const { log(LogLevel::kInfo, m, f); }
  void warn(std::string_view m, std::initializer_list<Field> f = {}) const { log(LogLevel::kWarn, m, f); }
  void error(std::string_view m, std::initializer_list<Field> f = {}) const { log(LogLevel::kError, m, f); }

 private:
  std::shared_ptr<LogSink> sink_;
  LogLevel level_;
  std::vector<Field> fixed_;
};

}  // namespace kiln
