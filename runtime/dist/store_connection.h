#pragma once
// The key-value store the processes of a run meet through: a connection to the
// store process 0 hosts on MASTER_ADDR:MASTER_PORT (store_server.h), with
// errors that say what to fix (a port already in use, a master that cannot
// be reached, a secret that does not match). Gloo exchanges its connection
// addresses through it, and the processes post heartbeats and failure
// reasons in it. Thread-safe.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gloo::rendezvous {
class Store;
}

namespace exogym::runtime::dist {

class StoreConnection {
 public:
  // host: host the store on addr:port (process 0; addr must be this host's),
  // then connect to it as every process does, retrying until `timeout`. Both
  // ends prove they hold `secret` (run_secret.h). Throws sdk::Error.
  StoreConnection(const std::string& addr, int port, bool host, const std::string& secret,
                  std::chrono::milliseconds timeout);
  ~StoreConnection();
  StoreConnection(const StoreConnection&) = delete;
  StoreConnection& operator=(const StoreConnection&) = delete;

  void set(const std::string& key, const std::string& value);
  // Waits up to the store's timeout for the key.
  std::string get(const std::string& key);
  // Whether every key exists (does not wait).
  bool check(const std::vector<std::string>& keys);
  // Adds `delta` to a counter (created at 0) and returns the new value; with
  // delta 0 it reads the counter without waiting.
  int64_t add(const std::string& key, int64_t delta);
  // Throws sdk::Error if a key is still missing after `timeout`.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  // Gloo's view of the same store, for its rendezvous.
  gloo::rendezvous::Store& gloo_store();

  const std::string& address() const { return address_; }  // "addr:port"
  // On process 0: the connections refused for want of the secret.
  int refused_clients() const;

 private:
  void handshake(const std::string& secret);
  std::string request(const std::string& message);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace exogym::runtime::dist
