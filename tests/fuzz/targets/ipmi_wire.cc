// IPMI over LAN, both sides: every decoder of drivers/ipmi/wire.h, which the
// driver runs on what a BMC sends and kiln-vbmc runs on what a console sends.
// The first byte picks the decoder; the rest is the datagram or payload.
#include <cstdint>

#include "drivers/ipmi/rmcpplus_crypto.h"
#include "drivers/ipmi/wire.h"

using namespace kiln::ipmi;

namespace {

// Session keys of cipher suites 3 and 17 from a fixed SIK, so authenticated
// and encrypted packets reach the integrity check and the decryption.
const SessionKeys& keys(int suite) {
  static const Bytes sik(20, 0x5a);
  static const SessionKeys k3 = derive_session_keys(*cipher_suite(3), sik);
  static const SessionKeys k17 = derive_session_keys(*cipher_suite(17), sik);
  return suite == 3 ? k3 : k17;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  ByteView in(data + 1, size - 1);
  switch (data[0] % 14) {
    case 0: (void)decode_asf_pong(in); break;
    case 1: (void)decode_ipmi_response(in); break;
    case 2: (void)decode_ipmi_request(in); break;
    case 3: (void)decode_v15_packet(in); break;
    case 4: (void)decode_v2_packet(in, nullptr); break;
    case 5: (void)is_v2_packet(in); break;
    case 6: (void)decode_open_session_response(in); break;
    case 7: (void)decode_rakp2(in, 20); break;
    case 8: (void)decode_rakp4(in, 12); break;
    case 9: (void)decode_open_session_request(in); break;
    case 10: (void)decode_rakp1(in); break;
    case 11: (void)decode_rakp3(in); break;
    case 12: (void)decode_v2_packet(in, &keys(3)); break;
    case 13: (void)decode_v2_packet(in, &keys(17)); break;
  }
  return 0;
}
