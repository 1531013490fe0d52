#include "bench/soak/process_sample.h"

#include <dirent.h>

#include <fstream>
#include <string>

namespace kiln::soak {

std::optional<ProcessSample> sample_process(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  ProcessSample s;
  bool rss = false;
  {
    std::ifstream status(dir + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmRSS:", 0) == 0) {
        s.rss_kib = std::stoll(line.substr(6));  // "VmRSS:	  12345 kB"
        rss = true;
        break;
      }
    }
  }
  if (!rss) return std::nullopt;
  DIR* d = ::opendir((dir + "/fd").c_str());
  if (d == nullptr) return std::nullopt;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++s.fds;
  }
  ::closedir(d);
  return s;
}

}  // namespace kiln::soak
