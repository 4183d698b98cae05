#include "exogym/runtime/dist/store_connection.h"

#include <fcntl.h>
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

#include "exogym/runtime/dist/store_protocol.h"
#include "exogym/runtime/dist/store_server.h"
#include "exogym/runtime/util/duration_text.h"
#include "exogym/runtime/util/sha256.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::dist {

namespace {

using Clock = std::chrono::steady_clock;
using util::seconds_text;

namespace protocol = store_protocol;

// One attempt to open a TCP connection to addr:port within `budget`: the
// connected socket (blocking), or -1 with `error` set.
int try_connect(const std::string& addr, int port, std::chrono::milliseconds budget, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    error = std::string("cannot resolve \"") + addr + "\": " + gai_strerror(rc);
    return -1;
  }
  int connected = -1;
  for (addrinfo* a = found; a && connected < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    bool ok = false;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, budget.count()))) == 1) {
        int so_error = 0;
        socklen_t len = sizeof so_error;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        ok = so_error == 0;
        if (!ok) error = std::strerror(so_error);
      } else {
        error = "no answer";
      }
    } else {
      error = std::strerror(errno);
    }
    if (ok) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      connected = fd;
    } else {
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  return connected;
}

void set_timeouts(int fd, std::chrono::milliseconds timeout) {
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

}  // namespace

// Gloo's store interface over the rendezvous store, under a key prefix of its own.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(StoreConnection& store, std::chrono::milliseconds timeout) : store_(store), timeout_(timeout) {}
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
  StoreConnection& store_;
  std::chrono::milliseconds timeout_;
};

struct StoreConnection::Impl {
  std::unique_ptr<StoreServer> server;  // process 0 only
  int fd = -1;
  std::unique_ptr<GlooStoreAdapter> gloo;
  std::chrono::milliseconds timeout;
  std::mutex mutex;  // one request at a time on the connection
  ~Impl() {
    if (fd >= 0) ::close(fd);
  }
};

StoreConnection::StoreConnection(const std::string& addr, int port, bool host, const std::string& secret,
                                 std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()), address_(addr + ":" + std::to_string(port)) {
  impl_->timeout = timeout;
  if (host) impl_->server = std::make_unique<StoreServer>(addr, port, secret);
  const auto deadline = Clock::now() + timeout;
  std::string error;
  while ((impl_->fd = try_connect(addr, port, std::chrono::milliseconds(500), error)) < 0) {
    if (Clock::now() >= deadline) {
      throw sdk::Error("cannot reach the rendezvous store at " + address_ + " (MASTER_ADDR:MASTER_PORT) within " +
                       seconds_text(timeout) + ": " + error +
                       "; is process 0 (RANK=0) running, and is the port open between the hosts?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  set_timeouts(impl_->fd, timeout);
  handshake(secret);
  impl_->gloo = std::make_unique<GlooStoreAdapter>(*this, timeout);
}

StoreConnection::~StoreConnection() = default;

void StoreConnection::handshake(const std::string& secret) {
  const std::string refused = "the rendezvous store at " + address_ +
                              " refused this process: it does not hold the run's secret (set the same " +
                              "EXOGYM_RUN_SECRET or EXOGYM_RUN_SECRET_FILE for every process)";
  std::string server_nonce, answer;
  const std::string nonce = protocol::random_nonce();
  if (!protocol::receive_frame(impl_->fd, server_nonce) || server_nonce.size() != protocol::kNonceSize ||
      nonce.empty() || !protocol::send_frame(impl_->fd, nonce + protocol::proof(secret, "client", server_nonce))) {
    throw sdk::Error("the process at " + address_ + " does not answer as an ExoGym rendezvous store");
  }
  if (!protocol::receive_frame(impl_->fd, answer) || answer.empty() || answer.front() != '+') throw sdk::Error(refused);
  // Constant time: the proof is a secret's HMAC (util/sha256.h).
  if (!util::bytes_equal(std::string_view(answer).substr(1), protocol::proof(secret, "server", nonce))) {
    throw sdk::Error("the process answering at " + address_ +
                     " does not hold the run's secret: it is not this run's rendezvous store");
  }
}

std::string StoreConnection::request(const std::string& message) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::string answer;
  if (!protocol::send_frame(impl_->fd, message) || !protocol::receive_frame(impl_->fd, answer) || answer.empty()) {
    throw sdk::Error("lost the connection to the rendezvous store at " + address_ +
                     " (process 0 ended or is unreachable)");
  }
  return answer;
}

void StoreConnection::set(const std::string& key, const std::string& value) {
  std::string message(1, protocol::kSet);
  protocol::put_field(message, key);
  protocol::put_field(message, value);
  request(message);
}

std::string StoreConnection::get(const std::string& key) {
  wait({key}, impl_->timeout);
  std::string message(1, protocol::kGet);
  protocol::put_field(message, key);
  const std::string answer = request(message);
  EXOGYM_CHECK_INTERNAL(answer.front() == '+', "a key the store had is gone: " + key);
  return answer.substr(1);
}

bool StoreConnection::check(const std::vector<std::string>& keys) {
  std::string message(1, protocol::kCheck);
  for (const auto& key : keys) protocol::put_field(message, key);
  return request(message).front() == '+';
}

int64_t StoreConnection::add(const std::string& key, int64_t delta) {
  std::string message(1, protocol::kAdd);
  protocol::put_field(message, key);
  protocol::put_field(message, std::to_string(delta));
  const std::string answer = request(message);
  if (answer.front() != '+') throw sdk::Error("the rendezvous store key " + key + " is not a counter");
  return std::stoll(answer.substr(1));
}

void StoreConnection::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  // Poll, so that other threads (the heartbeat) keep the connection meanwhile.
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

int StoreConnection::refused_clients() const { return impl_->server ? impl_->server->refused() : 0; }

gloo::rendezvous::Store& StoreConnection::gloo_store() { return *impl_->gloo; }

}  // namespace exogym::runtime::dist
