// inspect_qcow2 (qcow2_image.h): kilnd's own header check, then qemu-img's
// view of the image, which must agree. The conversion is qcow2_convert.cc.

#include "controller/boot/qcow2_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/child_process.h"
#include "common/json_text.h"
#include "controller/boot/qcow2_io.h"

namespace kiln::boot {

namespace {

using namespace qcow2_io;

constexpr size_t kMaxInfoJson = size_t{16} << 20;    // qemu-img info: even 65536 snapshots fit
constexpr auto kInfoTimeout = std::chrono::seconds(60);


// Checks qemu-img's view of the image against the header's. The JSON is
// qemu's, but its strings come from the image (snapshot names): parsed with
// parse_json's bounds, read field by field, anything unexpected refused.
Status check_qemu_agrees(const std::string& text, const Qcow2Info& info) {
  if (text.size() > kMaxInfoJson) return Error(Code::kUnprocessable, "qcow2 image refused: qemu-img info says too much");
  auto parsed = parse_json(text, JsonLimits{.max_depth = 16});
  if (!parsed || !parsed->is_object()) {
    return Error(Code::kUnprocessable, "qcow2 image refused: qemu-img info gave no JSON object");
  }
  const nlohmann::json& j = *parsed;
  const auto refuse = [](const std::string& why) {
    return Error(Code::kUnprocessable, "qcow2 image refused: qemu-img " + why);
  };
  const auto format = j.find("format");
  if (format == j.end() || !format->is_string() || format->get<std::string>() != "qcow2") {
    return refuse("does not read it as qcow2");
  }
  const auto vsize = j.find("virtual-size");
  if (vsize == j.end() || !vsize->is_number_unsigned() ||
      vsize->get<uint64_t>() != static_cast<uint64_t>(info.virtual_size)) {
    return refuse("reports a virtual size other than the header's " + std::to_string(info.virtual_size));
  }
  for (const char* key : {"backing-filename", "full-backing-filename", "backing-filename-format", "backing-image"}) {
    if (j.contains(key)) return refuse("reports a backing file");
  }
  if (const auto enc = j.find("encrypted"); enc != j.end() && !(enc->is_boolean() && !enc->get<bool>())) {
    return refuse("reports it encrypted");
  }
  if (const auto fs = j.find("format-specific"); fs != j.end()) {
    if (!fs->is_object()) return refuse("gave a malformed format-specific section");
    if (const auto data = fs->find("data"); data != fs->end()) {
      if (!data->is_object()) return refuse("gave a malformed format-specific section");
      if (data->contains("data-file") || data->contains("data-file-raw")) return refuse("reports an external data file");
      if (data->contains("encrypt")) return refuse("reports it encrypted");
    }
  }
  return ok_status();
}

}  // namespace

Result<Qcow2Info> inspect_qcow2(const std::string& path, const std::string& qemu_img) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.ok()) {
    if (errno == ENOENT) return Error(Code::kNotFound, "no image file " + path);
    return Error(Code::kInternal, "opening " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error(Code::kInternal, "stat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Error(Code::kUnprocessable, "qcow2 image refused: not a regular file");
  std::vector<uint8_t> head(static_cast<size_t>(std::min<int64_t>(st.st_size, kQcow2HeadBytes)));
  size_t got = 0;
  if (auto r = full_pread(fd.get(), head.data(), head.size(), 0, &got); !r) return r.error();
  head.resize(got);
  auto info = parse_qcow2_header(head, st.st_size);
  if (!info) return info;

  auto run = run_program({qemu_img, "info", "--output=json", "--image-opts", qcow2_opts(path)}, kInfoTimeout);
  if (!run) {
    return Error(Code::kInternal, "qemu-img info cannot run (" + qemu_img + "): " + run.error().message);
  }
  if (run->status != 0) {
    return Error(Code::kUnprocessable, "qcow2 image refused: qemu-img cannot read it: " + tool_words(run->err));
  }
  if (auto s = check_qemu_agrees(run->out, *info); !s) return s.error();
  return info;
}

}  // namespace kiln::boot
