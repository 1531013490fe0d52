#pragma once
// Test fixtures for the ipmi_sim suite:
//  - SimBmc: one ipmi_sim process on 127.0.0.1 and a free UDP port, with a
//    generated lan.conf, emulator command file and chassis-control script
//    (which keeps power and boot device in files) in a private temp dir.
//    Killed (its whole process group) and cleaned up on destruction.
//  - ipmitool(): the independent observer.
//  - LossyProxy: a UDP relay on loopback that drops a fraction of datagrams
//    in both directions with a seeded RNG, on its own thread.

#include <atomic>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/post.hpp>

namespace kiln::test {

// Absolute path of `name` on $PATH, or nullopt.
std::optional<std::string> find_on_path(const std::string& name);

class SimBmc {
 public:
  // Starts ipmi_sim and waits (up to 10 s) until it listens. `user`/`password`
  // is the one admin account. Check ok() before use; error() says why not.
  SimBmc(std::string user = "admin", std::string password = "password");
  ~SimBmc();
  SimBmc(const SimBmc&) = delete;
  SimBmc& operator=(const SimBmc&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }

  // Runs `ipmitool -I lanplus -H 127.0.0.1 -p PORT -U user -P password -C suite <args>`
  // and returns its combined output (nullopt when ipmitool is not installed).
  std::optional<std::string> ipmitool(const std::string& args, int suite = 3) const;
  // "on" / "off" from `chassis power status`, or the raw output when unparseable.
  std::string observed_power(int suite = 3) const;
  // The chassis script's own record of the power line ("0"/"1").
  std::string power_file() const;

 private:
  std::string user_;
  std::string password_;
  std::string dir_;
  uint16_t port_ = 0;
  int pid_ = -1;
  std::string error_;
};

class LossyProxy {
 public:
  // Relays 127.0.0.1:port() <-> 127.0.0.1:target_port, dropping each datagram
  // with probability `drop` (mt19937 seeded with `seed`).
  LossyProxy(uint16_t target_port, double drop, uint32_t seed);
  ~LossyProxy();
  uint16_t port() const { return port_; }
  int forwarded() const { return forwarded_.load(); }
  int dropped() const { return dropped_.load(); }

 private:
  void run_front();
  void run_back();
  bool lose();

  boost::asio::io_context ioc_;
  boost::asio::ip::udp::socket front_;
  boost::asio::ip::udp::socket back_;
  boost::asio::ip::udp::endpoint client_;
  bool have_client_ = false;
  std::mt19937 rng_;
  std::bernoulli_distribution coin_;
  uint16_t port_ = 0;
  std::atomic<int> forwarded_{0};
  std::atomic<int> dropped_{0};
  std::thread thread_;
};

}  // namespace kiln::test
