// The qcow2 header as kilnd reads it before qemu-img opens a tenant's image
// (controller/boot/qcow2_image.h parse_qcow2_header): the first 8 bytes are
// the file size (big-endian, any value, negative too), the rest the file's
// first bytes.
//
// Oracles: a header that is accepted describes what kilnd relies on (version
// 2 or 3, a virtual size in (0, 64 TiB] and a multiple of 512, the size it was
// given), the same bytes give the same answer, and a refusal is always
// kUnprocessable (kInvalidArgument only for a negative size) with a message.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "controller/boot/qcow2_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t raw = 0;
  for (int i = 0; i < 8; ++i) raw = raw << 8 | data[i];
  const auto file_size = static_cast<int64_t>(raw);
  const std::span<const uint8_t> head(data + 8, size - 8);

  const auto r = kiln::boot::parse_qcow2_header(head, file_size);
  const auto again = kiln::boot::parse_qcow2_header(head, file_size);
  if (r.ok() != again.ok()) std::abort();
  if (r.ok()) {
    if (r->version != 2 && r->version != 3) std::abort();
    if (r->virtual_size <= 0 || r->virtual_size > kiln::boot::kMaxQcow2VirtualSize) std::abort();
    if (r->virtual_size % 512 != 0) std::abort();
    if (r->file_size != file_size) std::abort();
    if (again->virtual_size != r->virtual_size) std::abort();
  } else {
    const auto code = r.error().code;
    if (code != kiln::Code::kUnprocessable && !(code == kiln::Code::kInvalidArgument && file_size < 0)) std::abort();
    if (r.error().message.empty() || r.error().message != again.error().message) std::abort();
  }
  return 0;
}
