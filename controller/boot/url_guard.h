#pragma once
// Where kilnd may download an image from.
//
// An image URL is chosen by whoever registers the image, and kilnd fetches it
// from inside the provider's network: without a check, a URL is a way to make
// kilnd read its own API, a cloud metadata service or anything on loopback
// (server-side request forgery). DestinationPolicy decides per resolved
// address, after DNS, so a name cannot point somewhere a literal could not:
// loopback, unspecified, link-local (which holds 169.254.169.254 and
// fe80::/10), multicast and known metadata addresses are refused unless an
// operator allows a CIDR that holds them (--image-url-allow); kilnd's own
// listeners are refused always. The fetcher pins the checked address for the
// download (curl --resolve), so the name cannot be re-resolved elsewhere in
// between, and checks every redirect hop the same way.
//
// Thread-safety: every method is safe from any thread (the listener list is
// filled once the server has bound its port, while requests may arrive).

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "common/result.h"

namespace kiln::boot {

struct Cidr {
  boost::asio::ip::address network;
  unsigned prefix = 0;
  bool contains(const boost::asio::ip::address& a) const;
};

// "10.0.0.0/8", "2001:db8::/32", or a bare address (/32, /128).
// kInvalidArgument (field "--image-url-allow") otherwise.
Result<Cidr> parse_cidr(std::string_view text);

class DestinationPolicy {
 public:
  explicit DestinationPolicy(std::vector<Cidr> allowed = {}) : allowed_(std::move(allowed)) {}
  DestinationPolicy(const DestinationPolicy&) = delete;
  DestinationPolicy& operator=(const DestinationPolicy&) = delete;

  // kilnd's own API at `address`:`port`; an unspecified address (0.0.0.0,
  // ::) stands for every address of this host on that port.
  void add_own_listener(boost::asio::ip::address address, uint16_t port);

  // ok, or kInvalidArgument saying why `address`:`port` is not fetched from.
  Status check(const boost::asio::ip::address& address, uint16_t port) const;

 private:
  bool is_own_listener(const boost::asio::ip::address& address, uint16_t port) const;

  std::vector<Cidr> allowed_;
  struct Listener {
    boost::asio::ip::address address;
    uint16_t port;
  };
  mutable std::mutex mu_;
  std::vector<Listener> own_;  // guarded by mu_
};

}  // namespace kiln::boot
