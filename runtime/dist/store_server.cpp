#include "exogym/runtime/dist/store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "exogym/runtime/dist/store_protocol.h"
#include "exogym/runtime/util/sha256.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::dist {

namespace protocol = store_protocol;

namespace {

// Strangers could open connections without end; the run needs one or two per process.
constexpr size_t kMaxConnections = 256;
// How long a new connection has to prove it holds the secret.
constexpr int kHandshakeSeconds = 5;

std::string peer_name(const sockaddr_storage& peer) {
  char host[NI_MAXHOST] = {}, port[NI_MAXSERV] = {};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&peer), sizeof peer, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "an unknown address";
  }
  return std::string(host) + ":" + port;
}

void set_receive_timeout(int fd, int seconds) {
  timeval tv{seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

}  // namespace

struct StoreServer::Connection {
  int fd = -1;
  std::string peer;
  std::thread thread;
  std::atomic<bool> done{false};
};

StoreServer::StoreServer(const std::string& addr, int port, std::string secret) : secret_(std::move(secret)) {
  address_ = addr + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) throw sdk::Error("cannot resolve MASTER_ADDR \"" + addr + "\": " + gai_strerror(rc));
  int error = 0;
  for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      listen_fd_ = fd;
    } else {
      error = errno;
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) {
    if (error == EADDRINUSE) {
      throw sdk::Error("MASTER_PORT " + std::to_string(port) +
                       " is already in use on this host, so process 0 cannot host the rendezvous store there: choose "
                       "another port (--master-port or MASTER_PORT), or leave it out with --nproc to pick a free one");
    }
    throw sdk::Error("cannot host the rendezvous store at " + address_ + " (MASTER_ADDR:MASTER_PORT): " +
                     std::strerror(error) + "; MASTER_ADDR must be an address of process 0's host");
  }
  if (::pipe2(wake_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw sdk::Error(std::string("cannot start the rendezvous store: ") + std::strerror(errno));
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

StoreServer::~StoreServer() {
  {
    std::lock_guard<std::mutex> lock(connections_mutex_);
    stopping_ = true;
    // Wakes every connection's thread out of its blocking read.
    for (auto& c : connections_) ::shutdown(c->fd, SHUT_RDWR);
  }
  [[maybe_unused]] const ssize_t written = ::write(wake_[1], "x", 1);
  acceptor_.join();
  for (auto& c : connections_) {
    c->thread.join();
    ::close(c->fd);
  }
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void StoreServer::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(connections_mutex_);
    reap_finished();
    if (stopping_ || connections_.size() >= kMaxConnections) {
      ::close(fd);
      continue;
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    connection->peer = peer_name(peer);
    Connection& c = *connection;
    connections_.push_back(std::move(connection));
    c.thread = std::thread([this, &c] { serve(c); });
  }
}

void StoreServer::serve(Connection& c) {
  set_receive_timeout(c.fd, kHandshakeSeconds);
  if (!authenticate(c.fd, c.peer)) {
    ::shutdown(c.fd, SHUT_RDWR);
    c.done = true;
    return;
  }
  set_receive_timeout(c.fd, 0);  // no limit: a process may stay quiet
  std::string request;
  while (protocol::receive_frame(c.fd, request)) {
    if (!protocol::send_frame(c.fd, answer(request))) break;
  }
  ::shutdown(c.fd, SHUT_RDWR);
  c.done = true;
}

void StoreServer::reap_finished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!(*it)->done) {
      ++it;
      continue;
    }
    (*it)->thread.join();
    ::close((*it)->fd);
    it = connections_.erase(it);
  }
}

bool StoreServer::authenticate(int fd, const std::string& peer) {
  const std::string nonce = protocol::random_nonce();
  std::string reply;
  if (nonce.empty() || !protocol::send_frame(fd, nonce) || !protocol::receive_frame(fd, reply) ||
      reply.size() != protocol::kNonceSize + protocol::kProofSize ||
      !util::bytes_equal(reply.substr(protocol::kNonceSize), protocol::proof(secret_, "client", nonce))) {
    refused_.fetch_add(1);
    // The secret itself is never logged; the stranger's address is.
    if (auto log = spdlog::get("exogym")) {
      log->warn("rendezvous store {}: refused a connection from {}: it did not prove it holds the run's secret",
                address_, peer);
    }
    protocol::send_frame(fd, "-");
    return false;
  }
  return protocol::send_frame(fd, "+" + protocol::proof(secret_, "server", reply.substr(0, protocol::kNonceSize)));
}

std::string StoreServer::answer(std::string_view request) {
  if (request.empty()) return "-";
  const char op = request.front();
  request.remove_prefix(1);
  std::string key, value;
  std::lock_guard<std::mutex> lock(data_mutex_);
  switch (op) {
    case protocol::kSet:
      if (!protocol::take_field(request, key) || !protocol::take_field(request, value)) return "-";
      data_[key] = value;
      return "+";
    case protocol::kGet: {
      if (!protocol::take_field(request, key)) return "-";
      auto it = data_.find(key);
      return it == data_.end() ? "-" : "+" + it->second;
    }
    case protocol::kCheck:
      while (!request.empty()) {
        if (!protocol::take_field(request, key) || data_.count(key) == 0) return "-";
      }
      return "+";
    case protocol::kAdd: {
      if (!protocol::take_field(request, key) || !protocol::take_field(request, value)) return "-";
      int64_t total = 0;
      try {
        if (auto it = data_.find(key); it != data_.end()) total = std::stoll(it->second);
        total += std::stoll(value);
      } catch (const std::exception&) {
        return "-";
      }
      data_[key] = std::to_string(total);
      return "+" + data_[key];
    }
    default:
      return "-";
  }
}

}  // namespace exogym::runtime::dist
