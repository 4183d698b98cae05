#pragma once
// The rendezvous store's server, hosted by process 0 (store_protocol.h):
// a key-value map that the run's processes reach over TCP. It listens only
// on MASTER_ADDR (127.0.0.1 under --nproc: nothing is reachable from another
// machine), and serves only clients that prove they hold the run's secret;
// a client that does not is refused, and logged with its address.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace exogym::runtime::dist {

class StoreServer {
 public:
  // Listens on addr:port. Throws sdk::Error when the port is taken or the
  // address is not one of this host's.
  StoreServer(const std::string& addr, int port, std::string secret);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // Clients refused so far for want of the secret.
  int refused() const { return refused_.load(); }

 private:
  struct Connection;
  void accept_loop();
  void serve(Connection& connection);
  bool authenticate(int fd, const std::string& peer);
  void reap_finished();  // with connections_mutex_ held
  std::string answer(std::string_view request);

  const std::string secret_;
  std::string address_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe that ends the accept loop
  std::atomic<int> refused_{0};
  std::mutex data_mutex_;
  std::map<std::string, std::string> data_;
  std::mutex connections_mutex_;
  std::vector<std::unique_ptr<Connection>> connections_;
  bool stopping_ = false;
  std::thread acceptor_;
};

}  // namespace exogym::runtime::dist
