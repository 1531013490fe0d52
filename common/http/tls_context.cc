#include "common/http/tls_context.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <boost/system/error_code.hpp>

namespace kiln::http {

namespace ssl = boost::asio::ssl;

namespace {

void harden(ssl::context& ctx) {
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                  ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                  ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
}

bool is_ip_literal(const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

Result<std::shared_ptr<ssl::context>> make_server_tls_context(const std::string& cert_file,
                                                              const std::string& key_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  harden(*ctx);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) {
    return Error(Code::kInvalidArgument, "tls cert " + cert_file + ": " + ec.message());
  }
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec) {
    return Error(Code::kInvalidArgument, "tls key " + key_file + ": " + ec.message());
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return Error(Code::kInvalidArgument, "tls key " + key_file + " does not match the certificate");
  }
  return ctx;
}

Result<std::shared_ptr<ssl::context>> make_client_tls_context(bool verify,
                                                              const std::string& ca_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  harden(*ctx);
  if (!verify) {
    ctx->set_verify_mode(ssl::verify_none);
    return ctx;
  }
  boost::system::error_code ec;
  ctx->set_verify_mode(ssl::verify_peer, ec);
  if (!ca_file.empty()) {
    ctx->load_verify_file(ca_file, ec);
    if (ec) return Error(Code::kInvalidArgument, "ca file " + ca_file + ": " + ec.message());
  } else {
    ctx->set_default_verify_paths(ec);
    if (ec) return Error(Code::kInvalidArgument, "system trust store: " + ec.message());
  }
  return ctx;
}

Status set_client_tls_peer(SSL* ssl, const std::string& host, bool verify) {
  const bool ip = is_ip_literal(host);
  // RFC 6066: SNI carries host names only, never addresses.
  if (!ip && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    return Error(Code::kInvalidArgument, "tls: bad SNI host " + host);
  }
  if (!verify) return ok_status();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  int rc = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
              : X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  if (rc != 1) return Error(Code::kInvalidArgument, "tls: cannot verify host " + host);
  return ok_status();
}

}  // namespace kiln::http
