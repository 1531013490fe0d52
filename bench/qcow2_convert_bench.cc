// One convert_qcow2 run (controller/boot/qcow2_image.h) for bench/qcow2-convert:
//
//   qcow2_convert_bench SOURCE DEST [--work-dir D] [--slice-mib N]
//
// Prints one JSON line: seconds (wall, the whole call: inspection, qemu-img
// map and convert runs, copying, hashing, fsync, rename), size, virtual_size, sha256; or the error
// on stderr and exit 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "controller/boot/qcow2_image.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SOURCE DEST [--work-dir D] [--slice-mib N]\n", argv[0]);
    return 2;
  }
  kiln::boot::ConvertOptions opt;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--work-dir") opt.work_dir = value;
    else if (flag == "--slice-mib") opt.slice_bytes = std::atoll(value.c_str()) << 20;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = kiln::boot::convert_qcow2(argv[1], argv[2], opt);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r) {
    std::fprintf(stderr, "%s\n", r.error().message.c_str());
    return 1;
  }
  std::printf("{\"seconds\": %.4f, \"size\": %lld, \"virtual_size\": %lld, \"sha256\": \"%s\"}\n", s,
              static_cast<long long>(r->size), static_cast<long long>(r->virtual_size), r->sha256.c_str());
  return 0;
}
