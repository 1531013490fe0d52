#include "common/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace kiln {
namespace {

class StderrSink : public LogSink {
 public:
  void write(std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }

 private:
  std::mutex mu_;
};

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
    case LogLevel::kOff: return "off";
  }
  return "?";
}

void append_value(std::string& out, std::string_view v) {
  bool quote = v.empty() || v.find_first_of(" \"=\t\n") != std::string_view::npos;
  if (!quote) {
    out.append(v);
    return;
  }
  out.push_back('"');
  for (char c : v) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') { out.append("\\n"); continue; }
    out.push_back(c);
  }
  out.push_back('"');
}

}  // namespace

bool parse_log_level(std::string_view s, LogLevel* out) {
  if (s == "debug") *out = LogLevel::kDebug;
  else if (s == "info") *out = LogLevel::kInfo;
  else if (s == "warn") *out = LogLevel::kWarn;
  else if (s == "error") *out = LogLevel::kError;
  else if (s == "off") *out = LogLevel::kOff;
  else return false;
  return true;
}

Logger::Logger(LogLevel level) : sink_(std::make_shared<StderrSink>()), level_(level) {}
Logger::Logger(std::shared_ptr<LogSink> sink, LogLevel level) : sink_(std::move(sink)), level_(level) {}

Logger Logger::with(std::string key, std::string value) const {
  Logger copy = *this;
  copy.fixed_.emplace_back(std::move(key), std::move(value));
  return copy;
}

void Logger::log(LogLevel l, std::string_view msg, std::initializer_list<Field> fields) const {
  if (!enabled(l)) return;
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t t = system_clock::to_time_t(now);
  auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[96];
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  std::string line;
  line.reserve(128);
  line.append(ts).append(" ").append(level_name(l)).append(" ");
  append_value(line, msg);
  for (const auto& [k, v] : fixed_) {
    line.append(" ").append(k).append("=");
    append_value(line, v);
  }
  for (const auto& [k, v] : fields) {
    line.append(" ").append(k).append("=");
    append_value(line, v);
  }
  line.push_back('\n');
  sink_->write(line);
}

}  // namespace kiln
