// ProcessMesh: meeting the other processes at the store, then over Gloo.
#include <arpa/inet.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/dist/store_connection.h"
#include "exogym/runtime/dist/store_keys.h"
#include "exogym/runtime/util/duration_text.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::dist {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using util::seconds_text;

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0) return "unknown host";
  return buffer;
}

// The address of this host on the route to `master`: what peers can reach
// this process at (127.0.0.1 when the master is local).
std::string address_towards(const std::string& master) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(master.c_str(), "9", &hints, &found) != 0 || !found) return "127.0.0.1";
  std::string result = "127.0.0.1";
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    // A UDP "connect" sends nothing; it only picks the route.
    if (::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      sockaddr_in self{};
      socklen_t len = sizeof self;
      char text[INET_ADDRSTRLEN] = {};
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0 &&
          ::inet_ntop(AF_INET, &self.sin_addr, text, sizeof text)) {
        result = text;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return result;
}

}  // namespace

void ProcessMesh::rendezvous(const std::string& fingerprint) {
  claim_rank();
  const json hello = {{"world_size", size()},
                      {"fingerprint", fingerprint},
                      {"host", host_name()},
                      {"pid", static_cast<int64_t>(::getpid())}};
  store_->set(hello_key(rank()), hello.dump());
  // Process 0 first: a process started with another WORLD_SIZE would else
  // wait for ranks that never come.
  const auto deadline = Clock::now() + world_.timeout;
  for (int q = 0; q < size(); ++q) {
    wait_for_hello(q, deadline);
    check_hello(q, fingerprint);
  }
}

void ProcessMesh::claim_rank() {
  if (store_->add(rank_key(rank()), 1) > 1) {
    throw sdk::Error("RANK " + std::to_string(rank()) +
                     " is already taken by another process at the rendezvous store " + store_->address() +
                     ": give every process its own RANK (0 to WORLD_SIZE-1)");
  }
  claimed_ = true;
}

void ProcessMesh::wait_for_hello(int process, Clock::time_point deadline) {
  while (!store_->check({hello_key(process)})) {
    if (const auto aborted = published_abort()) {
      throw sdk::Error("process " + std::to_string(aborted->first) +
                       " gave up before the run started: " + aborted->second);
    }
    if (Clock::now() >= deadline) {
      std::string missing;
      for (int p = 0; p < size(); ++p) {
        if (!store_->check({hello_key(p)})) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      }
      throw sdk::Error("waited " + seconds_text(world_.timeout) + " for process" +
                       (missing.find(',') == std::string::npos ? " " : "es ") + missing +
                       " to join the rendezvous at " + store_->address() + " (WORLD_SIZE " + std::to_string(size()) +
                       "): start every RANK from 0 to " + std::to_string(size() - 1) +
                       " with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE, or raise --timeout");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void ProcessMesh::check_hello(int process, const std::string& fingerprint) {
  const json other = json::parse(store_->get(hello_key(process)));
  peers_[process].host = other.value("host", "?");
  peers_[process].pid = other.value("pid", int64_t{0});
  if (process == rank()) return;
  const int their_size = other.value("world_size", 0);
  if (their_size != size()) {
    throw sdk::Error("WORLD_SIZE mismatch: " + describe(process) + " was started with WORLD_SIZE " +
                     std::to_string(their_size) + ", this process (RANK " + std::to_string(rank()) + ") with " +
                     std::to_string(size()) + "; every process must be given the same WORLD_SIZE");
  }
  if (other.value("fingerprint", std::string()) != fingerprint) {
    throw sdk::Error(describe(process) +
                     " runs a different manifest (or other --set, --only options) than this process (RANK " +
                     std::to_string(rank()) + "); every process must run the same runs");
  }
}

void ProcessMesh::connect_gloo() {
  gloo::transport::tcp::attr attr;
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    attr.iface = iface;
  } else {
    attr.hostname = address_towards(world_.master_addr);
  }
  try {
    device_ = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank(), size());
    context->setTimeout(world_.timeout);
    context->connectFullMesh(store_->gloo_store(), device_);
    context_ = context;
  } catch (const std::exception& e) {
    throw sdk::Error("cannot connect this process (RANK " + std::to_string(rank()) + ", " +
                     (attr.iface.empty() ? "address " + attr.hostname : "interface " + attr.iface) +
                     ") to the other processes over Gloo/TCP within " + seconds_text(world_.timeout) + ": " + e.what() +
                     " (set GLOO_SOCKET_IFNAME to pick the network interface)");
  }
}

}  // namespace exogym::runtime::dist
