#pragma once
// TLS contexts for the HTTP server and client (private to kiln_http).
//
// Both enforce TLS 1.2 as the floor. A context is immutable once built and may
// be shared by any number of streams on any thread (OpenSSL reference-counts the
// SSL_CTX inside each SSL it creates).

#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "common/result.h"

namespace kiln::http {

// A server context with the PEM certificate chain and private key loaded.
// Errors: kInvalidArgument naming the file that could not be used.
Result<std::shared_ptr<boost::asio::ssl::context>> make_server_tls_context(
    const std::string& cert_file, const std::string& key_file);

// A client context. With `verify`, peers are checked against `ca_file` (PEM
// bundle) or, when it is empty, the system trust store; without, any
// certificate is accepted. Host name checks are per connection (see
// set_client_tls_peer). Errors: kInvalidArgument (unreadable ca_file).
Result<std::shared_ptr<boost::asio::ssl::context>> make_client_tls_context(
    bool verify, const std::string& ca_file);

// Configures one client SSL object for `host`: SNI (for names, not IP
// literals) and, when `verify`, the name or IP the certificate must carry.
// Errors: kInvalidArgument when OpenSSL refuses the host.
Status set_client_tls_peer(SSL* ssl, const std::string& host, bool verify);

}  // namespace kiln::http
