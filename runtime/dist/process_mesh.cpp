#include "exogym/runtime/dist/process_mesh.h"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <csignal>

#include "exogym/runtime/dist/store_connection.h"
#include "exogym/runtime/dist/store_keys.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::dist {

using Clock = std::chrono::steady_clock;

ProcessMesh::ProcessMesh(const WorldSpec& world, const std::string& fingerprint)
    : world_(world), peers_(world.size), lost_(world.size, 0) {
  validate_world(world_);
  for (int q = 0; q < world_.size; ++q) everyone_.push_back(q);
  members_ = everyone_;
  // A write to a peer that died must fail (EPIPE) and be reported, not kill
  // this process.
  ::signal(SIGPIPE, SIG_IGN);
  period_ = std::clamp(world_.timeout / 4, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
  store_ = std::make_unique<StoreConnection>(world_.master_addr, world_.master_port, world_.rank == 0, world_.secret,
                                             world_.timeout);
  try {
    rendezvous(fingerprint);
    connect_gloo();
  } catch (const std::exception& e) {
    // Tell the others, who may be waiting for this process (unless this
    // process never got its rank: the rank's owner is fine).
    if (claimed_) publish_abort(e.what());
    if (rank() == 0) {
      // Keep the store up a moment so that they can read it.
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(world_.timeout, std::chrono::seconds(1)));
    }
    throw;
  }
  start_heartbeat();
}

ProcessMesh::~ProcessMesh() {
  stop_threads();
  if (!finished_ && store_) {
    try {
      store_->set(bye_key(rank()), "failed");
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
          while (Clock::now() < deadline && !store_->check({bye_key(q)})) {
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
  publish_abort(reason);
  try {
    if (context_) context_->closeConnections();
  } catch (...) {
  }
  std::lock_guard<std::mutex> calling(listener_mutex_);
  if (listener_) listener_(reason);
}

void ProcessMesh::publish_abort(const std::string& reason) {
  try {
    store_->set(abort_key(rank()), reason);
    store_->add(kAbortCount, 1);
  } catch (...) {
    // The store is gone: the peers notice this process's loss instead.
  }
}

std::optional<std::pair<int, std::string>> ProcessMesh::published_abort() {
  if (store_->add(kAbortCount, 0) == 0) return std::nullopt;
  for (int q = 0; q < size(); ++q) {
    if (q != rank() && store_->check({abort_key(q)})) return std::make_pair(q, store_->get(abort_key(q)));
  }
  return std::nullopt;
}

std::string ProcessMesh::explain_loss(int peer, const std::string& what) {
  std::string reason;
  try {
    if (store_->check({abort_key(peer)})) reason = store_->get(abort_key(peer));
  } catch (...) {
  }
  if (!reason.empty()) return describe(peer) + " failed: " + reason;
  return "lost " + describe(peer) + ": " + what + "; it died or became unreachable";
}

void ProcessMesh::finish() {
  barrier();
  stop_threads();
  try {
    store_->set(bye_key(rank()), "done");
    if (rank() == 0) {
      // The store lives here: leave only when every peer is done with it.
      std::vector<std::string> byes;
      for (int q = 1; q < size(); ++q) byes.push_back(bye_key(q));
      store_->wait(byes, world_.timeout);
    }
  } catch (const std::exception&) {
    // Every process passed the barrier: the run itself succeeded.
  }
  finished_ = true;
}

}  // namespace exogym::runtime::dist
