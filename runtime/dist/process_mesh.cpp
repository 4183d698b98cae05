#include "exogym/runtime/dist/process_mesh.h"

#include <arpa/inet.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "exogym/runtime/dist/rendezvous_store.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::dist {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Waits on peers are ended by fail(), not by a deadline: a slow peer is
// waited for; a dead or silent one fails the mesh.
constexpr auto kForever = std::chrono::hours(24 * 365);

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

std::string seconds_text(std::chrono::milliseconds t) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g s", static_cast<double>(t.count()) / 1000.0);
  return buffer;
}

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

std::string key(const char* prefix, int process) { return std::string(prefix) + std::to_string(process); }

}  // namespace

ProcessMesh::ProcessMesh(const WorldSpec& world, const std::string& fingerprint)
    : world_(world), peers_(world.size), lost_(world.size, 0) {
  validate_world(world_);
  // A write to a peer that died must fail (EPIPE) and be reported, not kill
  // this process.
  ::signal(SIGPIPE, SIG_IGN);
  period_ = std::clamp(world_.timeout / 4, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
  store_ = std::make_unique<RendezvousStore>(world_.master_addr, world_.master_port, world_.rank == 0, world_.timeout);
  try {
    rendezvous(fingerprint);
    connect_gloo();
  } catch (const std::exception& e) {
    // Tell the others, who may be waiting for this process (unless this
    // process never got its rank: the rank's owner is fine).
    try {
      if (claimed_) {
        store_->set(key("abort/", rank()), e.what());
        store_->add("aborts", 1);
      }
    } catch (...) {
    }
    if (rank() == 0) {
      // Keep the store up a moment so that they can read it.
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(world_.timeout, std::chrono::seconds(1)));
    }
    throw;
  }
  last_store_answer_ms_ = now_ms();
  monitor_ = std::thread([this] { monitor_loop(); });
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

ProcessMesh::~ProcessMesh() {
  stop_threads();
  if (!finished_ && store_) {
    try {
      store_->set(key("bye/", rank()), "failed");
      if (rank() == 0) {
        // The store lives in this process: give the others a moment to read
        // why the run stopped before it goes.
        const auto deadline =
            Clock::now() + std::min<std::chrono::milliseconds>(world_.timeout, std::chrono::seconds(5));
        for (int q = 1; q < size(); ++q) {
          {
            std::lock_guard<std::mutex> lock(mutex_);
            if (lost_[q]) continue;
          }
          while (Clock::now() < deadline && !store_->check({key("bye/", q)})) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }
      }
    } catch (...) {
    }
  }
  context_.reset();
  device_.reset();
  store_.reset();
}

void ProcessMesh::rendezvous(const std::string& fingerprint) {
  const json hello = {{"world_size", size()},
                      {"fingerprint", fingerprint},
                      {"host", host_name()},
                      {"pid", static_cast<int64_t>(::getpid())}};
  if (store_->add(key("rank/", rank()), 1) > 1) {
    throw sdk::Error("RANK " + std::to_string(rank()) +
                     " is already taken by another process at the rendezvous store " + store_->address() +
                     ": give every process its own RANK (0 to WORLD_SIZE-1)");
  }
  claimed_ = true;
  store_->set(key("hello/", rank()), hello.dump());

  // Process 0 first: a process started with another WORLD_SIZE would else
  // wait for ranks that never come.
  std::vector<int> order;
  for (int q = 0; q < size(); ++q) order.push_back(q);
  const auto deadline = Clock::now() + world_.timeout;
  for (int q : order) {
    while (!store_->check({key("hello/", q)})) {
      if (store_->add("aborts", 0) > 0) {
        for (int p = 0; p < size(); ++p) {
          if (store_->check({key("abort/", p)})) {
            throw sdk::Error("process " + std::to_string(p) +
                             " gave up before the run started: " + store_->get(key("abort/", p)));
          }
        }
      }
      if (Clock::now() >= deadline) {
        std::string missing;
        for (int p = 0; p < size(); ++p) {
          if (!store_->check({key("hello/", p)})) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        }
        throw sdk::Error("waited " + seconds_text(world_.timeout) + " for process" +
                         (missing.find(',') == std::string::npos ? " " : "es ") + missing +
                         " to join the rendezvous at " + store_->address() + " (WORLD_SIZE " + std::to_string(size()) +
                         "): start every RANK from 0 to " + std::to_string(size() - 1) +
                         " with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE, or raise --timeout");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const json other = json::parse(store_->get(key("hello/", q)));
    peers_[q].host = other.value("host", "?");
    peers_[q].pid = other.value("pid", int64_t{0});
    if (q == rank()) continue;
    const int their_size = other.value("world_size", 0);
    if (their_size != size()) {
      throw sdk::Error("WORLD_SIZE mismatch: " + describe(q) + " was started with WORLD_SIZE " +
                       std::to_string(their_size) + ", this process (RANK " + std::to_string(rank()) + ") with " +
                       std::to_string(size()) + "; every process must be given the same WORLD_SIZE");
    }
    if (other.value("fingerprint", std::string()) != fingerprint) {
      throw sdk::Error(describe(q) +
                       " runs a different manifest (or other --set, --only options) than this process (RANK " +
                       std::to_string(rank()) + "); every process must run the same runs");
    }
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

void ProcessMesh::set_nodes(int nodes) { nodes_ = nodes; }

std::string ProcessMesh::describe(int process) const {
  std::string text = "process " + std::to_string(process) + " (";
  if (const int nodes = nodes_.load(); nodes >= size())
    text += describe_block(node_block(nodes, size(), process)) + ", ";
  const Peer& peer = peers_.at(process);
  text += "pid " + std::to_string(peer.pid) + " on " + peer.host + ")";
  return text;
}

std::string ProcessMesh::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void ProcessMesh::throw_failure() { throw sdk::Error(failure()); }

void ProcessMesh::set_failure_listener(std::function<void(const std::string&)> listener) {
  // Waits for a call in progress, so that a listener is never called after
  // its removal (its owner may be gone).
  std::lock_guard<std::mutex> calling(listener_mutex_);
  listener_ = std::move(listener);
}

void ProcessMesh::fail(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    failure_ = reason;
    failed_ = true;
    for (auto* buffer : waiting_) {
      buffer->abortWaitRecv();
      buffer->abortWaitSend();
    }
  }
  // Publish first, then close: a peer that sees the connection go finds the
  // reason already there.
  try {
    store_->set(key("abort/", rank()), reason);
    store_->add("aborts", 1);
  } catch (...) {
  }
  try {
    if (context_) context_->closeConnections();
  } catch (...) {
  }
  std::lock_guard<std::mutex> calling(listener_mutex_);
  if (listener_) listener_(reason);
}

std::string ProcessMesh::explain_loss(int peer, const std::string& what) {
  std::string reason;
  try {
    if (store_->check({key("abort/", peer)})) reason = store_->get(key("abort/", peer));
  } catch (...) {
  }
  if (!reason.empty()) return describe(peer) + " failed: " + reason;
  return "lost " + describe(peer) + ": " + what + "; it died or became unreachable";
}

void ProcessMesh::exchange(const std::vector<Transfer>& transfers) {
  std::lock_guard<std::mutex> exclusive(exchange_mutex_);
  if (failed_) throw_failure();
  const uint64_t slot = context_->nextSlot();
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> buffers;
  buffers.reserve(transfers.size());
  for (const auto& t : transfers) buffers.push_back(context_->createUnboundBuffer(t.data, t.bytes));
  {
    // Registered before the first wait, so that fail() can end every wait.
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) throw sdk::Error(failure_);
    for (auto& b : buffers) waiting_.push_back(b.get());
  }
  auto forget = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_.clear();
  };
  size_t current = 0;
  bool complete = true;
  try {
    // Receives first, so that no send waits for a receive that is not posted.
    for (current = 0; current < transfers.size(); ++current) {
      if (transfers[current].receive)
        buffers[current]->recv(transfers[current].peer, slot, 0, transfers[current].bytes);
    }
    for (current = 0; current < transfers.size(); ++current) {
      if (!transfers[current].receive)
        buffers[current]->send(transfers[current].peer, slot, 0, transfers[current].bytes);
    }
    for (current = 0; current < transfers.size(); ++current) {
      const bool done =
          transfers[current].receive ? buffers[current]->waitRecv(kForever) : buffers[current]->waitSend(kForever);
      if (!done || failed_) {
        complete = false;  // fail() ended the wait
        break;
      }
    }
  } catch (const std::exception& e) {
    forget();
    if (failed_) throw_failure();
    const int peer = transfers.at(current).peer;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      lost_[peer] = 1;
    }
    const std::string reason = explain_loss(peer, e.what());
    fail(reason);
    throw sdk::Error(reason);
  }
  forget();
  if (!complete || failed_) throw_failure();
}

void ProcessMesh::all_gather(const void* mine, size_t bytes, const std::vector<void*>& out,
                             const std::vector<size_t>& sizes) {
  std::vector<Transfer> transfers;
  for (int q = 0; q < size(); ++q) {
    if (q == rank()) continue;
    if (sizes.at(q) > 0) transfers.push_back({q, out.at(q), sizes[q], true});
    if (bytes > 0) transfers.push_back({q, const_cast<void*>(mine), bytes, false});
  }
  exchange(transfers);
}

void ProcessMesh::broadcast(void* data, size_t bytes, int root) {
  if (bytes == 0) return;
  std::vector<Transfer> transfers;
  if (rank() == root) {
    for (int q = 0; q < size(); ++q) {
      if (q != root) transfers.push_back({q, data, bytes, false});
    }
  } else {
    transfers.push_back({root, data, bytes, true});
  }
  exchange(transfers);
}

void ProcessMesh::barrier() {
  char mine = 1;
  std::vector<char> theirs(size(), 0);
  std::vector<void*> out;
  for (auto& c : theirs) out.push_back(&c);
  all_gather(&mine, 1, out, std::vector<size_t>(size(), 1));
}

std::vector<std::string> ProcessMesh::all_gather_text(const std::string& mine) {
  uint64_t my_size = mine.size();
  std::vector<uint64_t> sizes(size(), 0);
  std::vector<void*> out;
  for (auto& s : sizes) out.push_back(&s);
  all_gather(&my_size, sizeof my_size, out, std::vector<size_t>(size(), sizeof(uint64_t)));
  sizes[rank()] = my_size;
  std::vector<std::string> texts(size());
  std::vector<void*> text_out;
  std::vector<size_t> text_sizes;
  for (int q = 0; q < size(); ++q) {
    texts[q].resize(sizes[q]);
    text_out.push_back(texts[q].data());
    text_sizes.push_back(sizes[q]);
  }
  all_gather(mine.data(), mine.size(), text_out, text_sizes);
  texts[rank()] = mine;
  return texts;
}

void ProcessMesh::monitor_loop() {
  std::vector<int64_t> seen(size(), -1);
  std::vector<Clock::time_point> since(size(), Clock::now());
  while (true) {
    {
      std::unique_lock<std::mutex> lock(stop_mutex_);
      if (stop_cv_.wait_for(lock, period_, [&] { return stop_; })) return;
    }
    if (failed_) return;
    try {
      store_->add(key("heartbeat/", rank()), 1);
      if (store_->add("aborts", 0) > 0) {
        for (int q = 0; q < size(); ++q) {
          if (q != rank() && store_->check({key("abort/", q)})) {
            fail(describe(q) + " failed: " + store_->get(key("abort/", q)));
            return;
          }
        }
      }
      const auto now = Clock::now();
      for (int q = 0; q < size(); ++q) {
        if (q == rank()) continue;
        const int64_t beat = store_->add(key("heartbeat/", q), 0);
        if (beat != seen[q]) {
          seen[q] = beat;
          since[q] = now;
        } else if (now - since[q] > world_.timeout) {
          {
            std::lock_guard<std::mutex> lock(mutex_);
            lost_[q] = 1;  // no goodbye will come from it
          }
          fail(describe(q) + " has shown no sign of life for " + seconds_text(world_.timeout) +
               " (its heartbeat stopped): it is hung or unreachable");
          return;
        }
      }
      last_store_answer_ms_ = now_ms();
    } catch (const std::exception& e) {
      if (!failed_) {
        fail("lost the rendezvous store at " + store_->address() + ", hosted by " + describe(0) + ": " + e.what() +
             "; process 0 died or became unreachable");
      }
      return;
    }
  }
}

void ProcessMesh::watchdog_loop() {
  // The heartbeat's store requests may block on a host that vanished; this
  // notices when they stop coming back.
  while (true) {
    {
      std::unique_lock<std::mutex> lock(stop_mutex_);
      if (stop_cv_.wait_for(lock, period_, [&] { return stop_; })) return;
    }
    if (failed_) return;
    const int64_t silent = now_ms() - last_store_answer_ms_.load();
    if (silent > world_.timeout.count() + 2 * period_.count()) {
      fail("the rendezvous store at " + store_->address() + ", hosted by " + describe(0) + ", has not answered for " +
           seconds_text(std::chrono::milliseconds(silent)) + ": process 0's host is unreachable");
      return;
    }
  }
}

void ProcessMesh::stop_threads() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

void ProcessMesh::finish() {
  barrier();
  stop_threads();
  try {
    store_->set(key("bye/", rank()), "done");
    if (rank() == 0) {
      // The store lives here: leave only when every peer is done with it.
      std::vector<std::string> byes;
      for (int q = 1; q < size(); ++q) byes.push_back(key("bye/", q));
      store_->wait(byes, world_.timeout);
    }
  } catch (const std::exception& e) {
    // Every process passed the barrier: the run itself succeeded.
  }
  finished_ = true;
}

}  // namespace exogym::runtime::dist
