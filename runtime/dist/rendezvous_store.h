#pragma once
// The key-value store the processes of a run meet through: LibTorch's c10d
// TCPStore, hosted by process 0 on MASTER_PORT, with errors that say what to
// fix (a port already in use, a master that cannot be reached). Gloo
// exchanges its connection addresses through it, and the processes post
// heartbeats and failure reasons in it. Thread-safe.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gloo::rendezvous {
class Store;
}

namespace exogym::runtime::dist {

class RendezvousStore {
 public:
  // host: host the store on `port` of this machine (process 0), else connect
  // to addr:port, retrying until `timeout`. Throws sdk::Error.
  RendezvousStore(const std::string& addr, int port, bool host, std::chrono::milliseconds timeout);
  ~RendezvousStore();
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace exogym::runtime::dist
