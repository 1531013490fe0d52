#pragma once
// How a wait shows progress.
//
// On a terminal: one line per node, redrawn in place (ANSI cursor-up and
// erase-line), each a bar with the node's state, step and time elapsed.
// Otherwise (a pipe, a CI log): one plain line per change, never a control
// character, so logs read well and grep works: "[  12s] workers/a0: deploying
// (step write_image)". Writes to the stream it is given (the CLI passes
// stderr, keeping stdout for -o output); one thread.

#include <chrono>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cli {

struct ProgressRow {
  std::string key;    // what the row is about: "workers/node-3" or an allocation's name
  std::string state;  // the API's value
  std::string step;   // empty when none
  double fraction = 0;  // 0..1 for the bar
};

class ProgressView {
 public:
  virtual ~ProgressView() = default;
  // Shows the rows as of `elapsed` since the wait began.
  virtual void show(const std::vector<ProgressRow>& rows, std::chrono::milliseconds elapsed) = 0;
  // A one-line note (a stream drop, a replacement) between updates.
  virtual void note(const std::string& line) = 0;
};

// `tty`: redraw in place (width: the terminal's columns).
std::unique_ptr<ProgressView> make_progress_view(std::ostream& out, bool tty, int width);

// How far along a node in `state` is on the way to `active`, for the bar.
double node_fraction(const std::string& state);

}  // namespace kiln::cli
