#pragma once
// A temporary directory the test writes sample sysfs/procfs trees and files
// into; removed with everything in it when the test ends.

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

namespace kiln::test {

class TempTree {
 public:
  TempTree() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-checks-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    root_ = tmpl;
  }
  ~TempTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const std::string& root() const { return root_; }
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }

  // Writes `text` to root/rel, creating parent directories.
  void write(const std::string& rel, const std::string& text) const {
    const std::filesystem::path p = std::filesystem::path(root_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << text;
    REQUIRE(out.good());
  }

  void mkdir(const std::string& rel) const { std::filesystem::create_directories(std::filesystem::path(root_) / rel); }

  // An executable shell script at root/rel.
  void script(const std::string& rel, const std::string& body) const {
    write(rel, "#!/bin/sh\n" + body);
    REQUIRE(chmod(path(rel).c_str(), 0755) == 0);
  }

  // One PCI device under sys/bus/pci/devices/<addr>.
  void pci_device(const std::string& addr, const std::string& vendor, const std::string& cls,
                  const std::string& cur_speed = "", const std::string& max_speed = "", const std::string& cur_width = "",
                  const std::string& max_width = "") const {
    const std::string d = "sys/bus/pci/devices/" + addr + "/";
    write(d + "vendor", vendor + "\n");
    write(d + "class", cls + "\n");
    write(d + "device", "0x2330\n");
    if (!cur_speed.empty()) write(d + "current_link_speed", cur_speed + "\n");
    if (!max_speed.empty()) write(d + "max_link_speed", max_speed + "\n");
    if (!cur_width.empty()) write(d + "current_link_width", cur_width + "\n");
    if (!max_width.empty()) write(d + "max_link_width", max_width + "\n");
  }

 private:
  std::string root_;
};

}  // namespace kiln::test
