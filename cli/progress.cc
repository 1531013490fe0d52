#include "cli/progress.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "cli/duration.h"

namespace kiln::cli {

namespace {

std::string padded(std::chrono::milliseconds elapsed) {
  std::string s = short_span(elapsed);
  if (s.size() < 5) s = std::string(5 - s.size(), ' ') + s;
  return s;
}

class TerminalView : public ProgressView {
 public:
  TerminalView(std::ostream& out, int width) : out_(out), width_(width > 20 ? width : 80) {}

  void show(const std::vector<ProgressRow>& rows, std::chrono::milliseconds elapsed) override {
    std::string frame;
    if (drawn_ > 0) frame += "\x1b[" + std::to_string(drawn_) + "A";  // back to the first row
    std::size_t key_w = 4;
    for (const auto& r : rows) key_w = std::max(key_w, r.key.size());
    key_w = std::min<std::size_t>(key_w, 32);
    for (const auto& r : rows) {
      constexpr int kBar = 20;
      const int filled = static_cast<int>(std::clamp(r.fraction, 0.0, 1.0) * kBar + 0.5);
      std::string line = r.key.substr(0, key_w) + std::string(key_w - std::min(key_w, r.key.size()), ' ');
      line += " [" + std::string(filled, '#') + std::string(kBar - filled, '-') + "] ";
      line += r.state;
      if (!r.step.empty()) line += " (" + r.step + ")";
      line += "  " + short_span(elapsed);
      if (line.size() > static_cast<std::size_t>(width_ - 1)) line.resize(width_ - 1);
      frame += "\r\x1b[2K" + line + "\n";
    }
    drawn_ = static_cast<int>(rows.size());
    out_ << frame << std::flush;
  }

  void note(const std::string& line) override {
    // Above the bars: erase them, print, and let the next show() redraw below.
    std::string frame;
    if (drawn_ > 0) frame += "\x1b[" + std::to_string(drawn_) + "A\x1b[J";
    drawn_ = 0;
    out_ << frame << line << "\n" << std::flush;
  }

 private:
  std::ostream& out_;
  int width_;
  int drawn_ = 0;
};

class LineView : public ProgressView {
 public:
  explicit LineView(std::ostream& out) : out_(out) {}

  void show(const std::vector<ProgressRow>& rows, std::chrono::milliseconds elapsed) override {
    for (const auto& r : rows) {
      std::string now = r.state + (r.step.empty() ? "" : " (step " + r.step + ")");
      auto it = last_.find(r.key);
      if (it != last_.end() && it->second == now) continue;
      last_[r.key] = now;
      out_ << "[" << padded(elapsed) << "] " << r.key << ": " << now << "\n";
    }
    out_ << std::flush;
  }

  void note(const std::string& line) override { out_ << line << "\n" << std::flush; }

 private:
  std::ostream& out_;
  std::map<std::string, std::string> last_;
};

}  // namespace

std::unique_ptr<ProgressView> make_progress_view(std::ostream& out, bool tty, int width) {
  if (tty) return std::make_unique<TerminalView>(out, width);
  return std::make_unique<LineView>(out);
}

double node_fraction(const std::string& state) {
  // The road a member travels: claimed while available, then deploy (image,
  // config drive, reboot), then the validation gate, then active.
  if (state == "available") return 0.1;
  if (state == "deploying") return 0.4;
  if (state == "validating") return 0.8;
  if (state == "active") return 1.0;
  if (state == "cleaning" || state == "burning_in") return 0.2;
  return 0.0;
}

}  // namespace kiln::cli
