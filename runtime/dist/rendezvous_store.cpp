#include "exogym/runtime/dist/rendezvous_store.h"

#include <gloo/rendezvous/store.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "exogym/runtime/dist/tcp_ports.h"
#include "exogym/runtime/util/duration_text.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::dist {

namespace {

using Clock = std::chrono::steady_clock;
using util::seconds_text;

// One attempt to open a TCP connection to addr:port within `budget`.
bool try_connect(const std::string& addr, int port, std::chrono::milliseconds budget, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    error = std::string("cannot resolve \"") + addr + "\": " + gai_strerror(rc);
    return false;
  }
  bool connected = false;
  for (addrinfo* a = found; a && !connected; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      connected = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, budget.count()))) == 1) {
        int so_error = 0;
        socklen_t len = sizeof so_error;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        if (so_error == 0) {
          connected = true;
        } else {
          error = std::strerror(so_error);
        }
      } else {
        error = "no answer";
      }
    } else {
      error = std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return connected;
}

}  // namespace

// Gloo's store interface over the c10d store, under a key prefix of its own.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(RendezvousStore& store, std::chrono::milliseconds timeout) : store_(store), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set("gloo/" + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string value = store_.get("gloo/" + key);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> prefixed;
    for (const auto& k : keys) prefixed.push_back("gloo/" + k);
    store_.wait(prefixed, timeout);
  }

 private:
  RendezvousStore& store_;
  std::chrono::milliseconds timeout_;
};

struct RendezvousStore::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  std::unique_ptr<GlooStoreAdapter> gloo;
  std::chrono::milliseconds timeout;
  std::mutex mutex;  // one request at a time on the client connection
};

RendezvousStore::RendezvousStore(const std::string& addr, int port, bool host, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()), address_(addr + ":" + std::to_string(port)) {
  impl_->timeout = timeout;
  // c10d reports these cases through its logger with less context; find
  // them first and say what to do.
  if (host) {
    if (!port_is_free(port)) {
      throw sdk::Error("MASTER_PORT " + std::to_string(port) +
                       " is already in use on this host, so process 0 cannot host the rendezvous store there: choose "
                       "another port (--master-port or MASTER_PORT), or leave it out with --nproc to pick a free one");
    }
  } else {
    const auto deadline = Clock::now() + timeout;
    std::string error;
    while (!try_connect(addr, port, std::chrono::milliseconds(500), error)) {
      if (Clock::now() >= deadline) {
        throw sdk::Error("cannot reach the rendezvous store at " + address_ + " (MASTER_ADDR:MASTER_PORT) within " +
                         seconds_text(timeout) + ": " + error +
                         "; is process 0 (RANK=0) running, and is the port open between the hosts?");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = host;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(addr, options);
  } catch (const std::exception& e) {
    throw sdk::Error(std::string(host ? "cannot host" : "cannot connect to") + " the rendezvous store at " + address_ +
                     ": " + e.what());
  }
  impl_->gloo = std::make_unique<GlooStoreAdapter>(*this, timeout);
}

RendezvousStore::~RendezvousStore() = default;

static std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

void RendezvousStore::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->store->set(key, bytes(value));
}

std::string RendezvousStore::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const auto value = impl_->store->get(key);
  return std::string(value.begin(), value.end());
}

bool RendezvousStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->store->check(keys);
}

int64_t RendezvousStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->store->add(key, delta);
}

void RendezvousStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  // Poll instead of c10d's blocking wait, so that other threads (the
  // heartbeat) keep the connection meanwhile.
  const auto deadline = Clock::now() + timeout;
  while (!check(keys)) {
    if (Clock::now() >= deadline) {
      std::string missing;
      for (const auto& k : keys) {
        if (!check({k})) missing += (missing.empty() ? "" : ", ") + k;
      }
      throw sdk::Error("waited " + seconds_text(timeout) + " at the rendezvous store " + address_ + " for " + missing);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

gloo::rendezvous::Store& RendezvousStore::gloo_store() { return *impl_->gloo; }

}  // namespace exogym::runtime::dist
