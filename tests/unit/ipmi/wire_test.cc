// Packet building and parsing: fixed vectors, round trips, and hostile input
// (truncated, oversized, forged, bad checksum) that must come back as errors.

#include <catch2/catch.hpp>

#include <random>

#include "drivers/ipmi/wire.h"
#include "tests/unit/ipmi/test_bytes.h"

using namespace kiln;
using namespace kiln::ipmi;
using namespace kiln::ipmi::test;

namespace {

SessionKeys suite3_vector_keys() {
  SessionKeys k;
  k.suite = *cipher_suite(3);
  k.k1 = hex("e4472be78f9a81fa68297aab696a7be8c97fc9f8");
  k.aes_key = hex("2b6552012a2517cb3b5713901d757a6e");
  return k;
}

SessionKeys random_keys(int suite) {
  SessionKeys k;
  k.suite = *cipher_suite(suite);
  k.k1 = random_bytes(suite == 3 ? 20 : 32);
  k.aes_key = random_bytes(16);
  return k;
}

// A BMC-side response to Get Chassis Status, as it would travel back.
Bytes chassis_status_response(uint8_t rq_seq, uint8_t power) {
  Bytes m{0x81, static_cast<uint8_t>(0x01 << 2)};  // rqAddr, netFn 0x01 (chassis response)
  m.push_back(ipmi_checksum(m));
  const size_t from = m.size();
  m.push_back(0x20);
  m.push_back(static_cast<uint8_t>(rq_seq << 2));
  m.push_back(0x01);  // cmd
  m.push_back(0x00);  // completion code
  m.push_back(power);
  m.push_back(0x00);
  m.push_back(0x00);
  m.push_back(ipmi_checksum(ByteView(m.data() + from, m.size() - from)));
  return m;
}

}  // namespace

TEST_CASE("IPMI request encodes header, both checksums and data", "[wire]") {
  // Get Chassis Status, rqSeq 5: 20 | 00 | E0 | 81 | 14 | 01 | 6A
  const Bytes m = encode_ipmi_request(IpmiRequest{0x00, 0x01, 5, {}});
  CHECK(to_hex(m) == "2000e08114016a");
  // Get Channel Auth Caps with data, rqSeq 1: checksum2 covers rqAddr..data.
  const Bytes caps = encode_ipmi_request(IpmiRequest{0x06, 0x38, 1, {0x8e, 0x04}});
  CHECK(to_hex(caps) == "2018c8" "810438" "8e04" "b1");
  auto back = decode_ipmi_request(caps);
  REQUIRE(back.ok());
  CHECK(back->net_fn == 0x06);
  CHECK(back->cmd == 0x38);
  CHECK(back->rq_seq == 1);
  CHECK(back->data == Bytes{0x8e, 0x04});
}

TEST_CASE("IPMI response decoding checks both checksums and length", "[wire]") {
  const Bytes good = chassis_status_response(9, 0x01);
  auto r = decode_ipmi_response(good);
  REQUIRE(r.ok());
  CHECK(r->net_fn == 0x01);
  CHECK(r->rq_seq == 9);
  CHECK(r->cmd == 0x01);
  CHECK(r->completion_code == 0);
  CHECK(r->data == Bytes{0x01, 0x00, 0x00});

  Bytes bad1 = good;
  bad1[2] ^= 0xFF;  // header checksum
  CHECK(decode_ipmi_response(bad1).error().message == "IPMI header checksum mismatch");
  Bytes bad2 = good;
  bad2[7] ^= 0x01;  // data byte, checksum2 no longer matches
  CHECK(decode_ipmi_response(bad2).error().message == "IPMI data checksum mismatch");
  for (size_t n = 0; n < 8; ++n) {
    CHECK_FALSE(decode_ipmi_response(ByteView(good.data(), n)).ok());
  }
  Bytes huge(400, 0x00);
  CHECK_FALSE(decode_ipmi_response(huge).ok());
}

TEST_CASE("IPMI v1.5 pre-session packet layout and parsing", "[wire]") {
  const Bytes msg = encode_ipmi_request(IpmiRequest{0x06, 0x38, 1, {0x8e, 0x04}});
  const Bytes pkt = encode_v15_packet(msg);
  // RMCP | auth NONE | seq 0 | session 0 | length | message
  CHECK(to_hex(pkt) == "0600ff07" "00" "00000000" "00000000" "09" + to_hex(msg));
  auto back = decode_v15_packet(pkt);
  REQUIRE(back.ok());
  CHECK(*back == msg);

  for (size_t n = 0; n < pkt.size(); ++n) {
    CHECK_FALSE(decode_v15_packet(ByteView(pkt.data(), n)).ok());
  }
  Bytes wrong_class = pkt;
  wrong_class[3] = 0x06;
  CHECK_FALSE(decode_v15_packet(wrong_class).ok());
  Bytes trailing = pkt;
  trailing.push_back(0);
  trailing.push_back(0);
  CHECK_FALSE(decode_v15_packet(trailing).ok());
}

TEST_CASE("RMCP+ encrypted+authenticated packet matches the openssl-built vector", "[wire]") {
  // Built by hand with openssl (see rmcpplus_crypto_test.cc for K1/K2):
  //   header 06 c0 | sid 88776655 | seq 07000000 | len 2000 | IV | AES(...)
  //   | ffff (pad) | 02 | 07 | HMAC-SHA1(K1, 06c0 .. 07)[0..12)
  const SessionKeys keys = suite3_vector_keys();
  const Bytes msg = hex("2000e08114016a");
  const Bytes iv = hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
  const Bytes pkt = encode_v2_packet({PayloadType::kIpmi, true, true, 0x55667788, 7}, msg, &keys, iv);
  CHECK(to_hex(pkt) ==
        "0600ff07" "06c0" "88776655" "07000000" "2000"
        "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff" "d8b1282157fc70ab67225ea360c87f31"
        "ffff0207" "f857f2c58a92b82f125c4011");

  auto back = decode_v2_packet(pkt, &keys);
  REQUIRE(back.ok());
  CHECK(back->header.type == PayloadType::kIpmi);
  CHECK(back->header.encrypted);
  CHECK(back->header.authenticated);
  CHECK(back->header.session_id == 0x55667788);
  CHECK(back->header.sequence == 7);
  CHECK(back->payload == msg);
}

TEST_CASE("RMCP+ packets round trip for suites 3 and 17 at every payload length", "[wire]") {
  for (int suite : {3, 17}) {
    const SessionKeys keys = random_keys(suite);
    for (size_t n = 0; n <= 40; ++n) {
      const Bytes payload = random_bytes(n);
      for (bool enc : {false, true}) {
        const Bytes pkt = encode_v2_packet({PayloadType::kIpmi, enc, true, 42, static_cast<uint32_t>(1000 + n)}, payload,
                                           &keys, random_bytes(16));
        // auth type .. next header is a multiple of 4 (the integrity pad's job).
        CHECK((pkt.size() - 4 - integrity_mac_len(keys.suite.integrity)) % 4 == 0);
        auto back = decode_v2_packet(pkt, &keys);
        REQUIRE(back.ok());
        CHECK(back->payload == payload);
        CHECK(back->header.sequence == 1000 + n);
      }
    }
  }
}

TEST_CASE("RMCP+ decoding rejects a wrong MAC, a wrong key and tampering", "[wire]") {
  const SessionKeys keys = random_keys(3);
  const Bytes msg = chassis_status_response(3, 1);
  const Bytes pkt = encode_v2_packet({PayloadType::kIpmi, true, true, 1, 2}, msg, &keys, random_bytes(16));

  Bytes bad_mac = pkt;
  bad_mac.back() ^= 0x80;
  auto r1 = decode_v2_packet(bad_mac, &keys);
  REQUIRE_FALSE(r1.ok());
  CHECK(r1.error().code == Code::kUnauthenticated);

  SessionKeys other = keys;
  other.k1[0] ^= 1;
  CHECK(decode_v2_packet(pkt, &other).error().code == Code::kUnauthenticated);

  // Any single flipped byte after the RMCP header must be caught.
  for (size_t i = 4; i < pkt.size(); ++i) {
    Bytes t = pkt;
    t[i] ^= 0x04;
    CHECK_FALSE(decode_v2_packet(t, &keys).ok());
  }
  // Protected packets are refused outside a session.
  CHECK_FALSE(decode_v2_packet(pkt, nullptr).ok());
}

TEST_CASE("RMCP+ decoding rejects truncated and oversized datagrams", "[wire]") {
  const SessionKeys keys = random_keys(17);
  const Bytes pkt = encode_v2_packet({PayloadType::kIpmi, true, true, 1, 2}, hex("2000e08114016a"),
                                     &keys, random_bytes(16));
  for (size_t n = 0; n < pkt.size(); ++n) {
    CHECK_FALSE(decode_v2_packet(ByteView(pkt.data(), n), &keys).ok());
  }
  Bytes longer = pkt;
  longer.push_back(0);
  CHECK_FALSE(decode_v2_packet(longer, &keys).ok());
  Bytes huge(kMaxDatagram + 1, 0x06);
  CHECK_FALSE(decode_v2_packet(huge, &keys).ok());

  // A payload length field pointing past the end.
  Bytes plain = encode_v2_packet({PayloadType::kOpenSessionResponse, false, false, 0, 0},
                                 Bytes(36, 0), nullptr);
  plain[14] = 0xFF;
  plain[15] = 0xFF;
  CHECK_FALSE(decode_v2_packet(plain, nullptr).ok());
}

TEST_CASE("random garbage never crashes the decoders", "[wire]") {
  std::mt19937 rng(12345);
  const SessionKeys keys = random_keys(3);
  for (int i = 0; i < 5000; ++i) {
    Bytes d(rng() % 120);
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    if (d.size() >= 5 && (i % 2) == 0) {  // make half of them look like RMCP+
      d[0] = 0x06; d[1] = 0; d[2] = 0xff; d[3] = 0x07; d[4] = 0x06;
    }
    (void)decode_v2_packet(d, &keys);
    (void)decode_v2_packet(d, nullptr);
    (void)decode_v15_packet(d);
    (void)decode_ipmi_response(d);
    (void)decode_open_session_response(d);
    (void)decode_rakp2(d, 20);
    (void)decode_rakp4(d, 12);
    (void)decode_asf_pong(d);
  }
  SUCCEED();
}

TEST_CASE("Open Session request layout proposes one suite", "[wire]") {
  OpenSessionRequest r{0x2a, 0x04, 0xa0a1a2a3, *cipher_suite(17)};
  CHECK(to_hex(encode_open_session_request(r)) ==
        "2a040000" "a3a2a1a0"
        "0000000803000000"   // authentication: RAKP-HMAC-SHA256
        "0100000804000000"   // integrity: HMAC-SHA256-128
        "0200000801000000");  // confidentiality: AES-CBC-128
}

TEST_CASE("Open Session response parses, and rejects malformed forms", "[wire]") {
  OpenSessionResponse r;
  r.tag = 7;
  r.max_privilege = 4;
  r.console_session_id = 0x01020304;
  r.bmc_session_id = 0x0a0b0c0d;
  r.auth = AuthAlg::kHmacSha1;
  r.integrity = IntegrityAlg::kHmacSha1_96;
  r.confidentiality = ConfidentialityAlg::kAesCbc128;
  const Bytes b = encode_open_session_response(r);
  REQUIRE(b.size() == 36);
  auto back = decode_open_session_response(b);
  REQUIRE(back.ok());
  CHECK(back->bmc_session_id == 0x0a0b0c0d);
  CHECK(back->console_session_id == 0x01020304);
  CHECK(back->integrity == IntegrityAlg::kHmacSha1_96);

  // An error status may come as 8 bytes.
  Bytes err = {7, 0x11, 0, 0, 4, 3, 2, 1};
  auto e = decode_open_session_response(err);
  REQUIRE(e.ok());
  CHECK(e->status == 0x11);

  // ... or just tag + status: what ipmi_sim sends when it refuses suite 17.
  auto short_err = decode_open_session_response(hex("2a04"));
  REQUIRE(short_err.ok());
  CHECK(short_err->tag == 0x2a);
  CHECK(short_err->status == 0x04);
  CHECK_FALSE(decode_open_session_response(hex("2a")).ok());
  CHECK_FALSE(decode_open_session_response(hex("2a00")).ok());  // success needs all 36

  CHECK_FALSE(decode_open_session_response(ByteView(b.data(), 35)).ok());
  CHECK_FALSE(decode_open_session_response(ByteView(b.data(), 7)).ok());
  Bytes longer = b;
  longer.push_back(0);
  CHECK_FALSE(decode_open_session_response(longer).ok());
  Bytes bad_record = b;
  bad_record[15] = 0x10;  // auth payload length must be 8
  CHECK_FALSE(decode_open_session_response(bad_record).ok());
}

TEST_CASE("RAKP 1 layout carries the role byte and the user name", "[wire]") {
  Rakp1 r;
  r.tag = 1;
  r.bmc_session_id = 0x55667788;
  r.console_random = arr<16>("000102030405060708090a0b0c0d0e0f");
  r.role = 0x14;
  r.username = "admin";
  CHECK(to_hex(encode_rakp1(r)) ==
        "01000000" "88776655" "000102030405060708090a0b0c0d0e0f" "14" "0000" "05" "61646d696e");
}

TEST_CASE("RAKP 2 and 4 parse at the exact length only", "[wire]") {
  Rakp2 r2;
  r2.tag = 3;
  r2.console_session_id = 9;
  r2.bmc_random = arr<16>("101112131415161718191a1b1c1d1e1f");
  r2.bmc_guid = arr<16>("a123456789abcdefa123456789abcdef");
  r2.auth_code = Bytes(20, 0xab);
  const Bytes b2 = encode_rakp2(r2);
  auto back2 = decode_rakp2(b2, 20);
  REQUIRE(back2.ok());
  CHECK(back2->bmc_random == r2.bmc_random);
  CHECK(back2->bmc_guid == r2.bmc_guid);
  CHECK(back2->auth_code == r2.auth_code);
  CHECK_FALSE(decode_rakp2(b2, 32).ok());                       // SHA256 expects 72 bytes
  CHECK_FALSE(decode_rakp2(ByteView(b2.data(), 59), 20).ok());  // truncated
  Bytes longer = b2;
  longer.push_back(0);
  CHECK_FALSE(decode_rakp2(longer, 20).ok());

  Rakp4 r4{3, 0, 9, Bytes(12, 0xcd)};
  const Bytes b4 = encode_rakp4(r4);
  REQUIRE(decode_rakp4(b4, 12).ok());
  CHECK_FALSE(decode_rakp4(b4, 16).ok());
  CHECK_FALSE(decode_rakp4(ByteView(b4.data(), 19), 12).ok());
  Rakp4 refused{3, 0x0f, 9, {}};
  auto back4 = decode_rakp4(encode_rakp4(refused), 12);
  REQUIRE(back4.ok());
  CHECK(back4->status == 0x0f);
}

TEST_CASE("RAKP 3 layout", "[wire]") {
  Rakp3 r{5, 0, 0x55667788, Bytes(20, 0x11)};
  CHECK(to_hex(encode_rakp3(r)) == "05000000" "88776655" + std::string(40, '1'));
}

TEST_CASE("ASF presence ping layout and pong parsing", "[wire]") {
  CHECK(to_hex(encode_asf_ping(0x33)) == "0600ff06" "000011be" "80" "33" "00" "00");
  Bytes pong = hex("0600ff06 000011be 40 33 00 10 000011be 00000000 81 00 00 00 00 00 00 00");
  auto p = decode_asf_pong(pong);
  REQUIRE(p.ok());
  CHECK(p->tag == 0x33);
  CHECK(p->ipmi_supported);
  CHECK_FALSE(decode_asf_pong(ByteView(pong.data(), pong.size() - 1)).ok());
}

TEST_CASE("inbound replay window accepts fresh numbers once, within 16 behind", "[wire]") {
  ReplayWindow w;
  CHECK_FALSE(w.accept(0));
  CHECK(w.accept(1));
  CHECK_FALSE(w.accept(1));  // replay
  CHECK(w.accept(5));        // gap (lost packets) is fine
  CHECK(w.accept(3));        // late, inside the window
  CHECK_FALSE(w.accept(3));
  CHECK(w.accept(40));
  CHECK_FALSE(w.accept(24));  // 16 behind: outside
  CHECK(w.accept(25));        // 15 behind: inside, unseen
  CHECK_FALSE(w.accept(25));
  CHECK_FALSE(w.accept(40));
  CHECK(w.accept(41));
}
