// ProcessMesh: moving bytes between the processes over Gloo.
#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>

#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::dist {

namespace {

// Waits on peers are ended by fail(), not by a deadline: a slow peer is
// waited for; a dead or silent one fails the mesh.
constexpr auto kForever = std::chrono::hours(24 * 365);

}  // namespace

void ProcessMesh::exchange(const std::vector<PeerMessage>& transfers, Scope scope) {
  std::lock_guard<std::mutex> exclusive(exchange_mutex_);
  if (failed_) throw_failure();
  // Even slots for exchanges among every process, odd ones among members.
  const int kind = static_cast<int>(scope);
  const uint64_t slot = 2 * exchanges_[kind]++ + static_cast<uint64_t>(kind);
  transfer(transfers, slot);
}

void ProcessMesh::exchange_tagged(const std::vector<PeerMessage>& transfers, uint64_t tag) {
  if (failed_) throw_failure();
  // Slots with the top bit set: never one of exchange()'s counted ones.
  transfer(transfers, tag | (uint64_t{1} << 63));
}

void ProcessMesh::transfer(const std::vector<PeerMessage>& transfers, uint64_t slot) {
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
    // Only this exchange's: tagged ones may be waiting too.
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& b : buffers) waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), b.get()), waiting_.end());
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
                             const std::vector<size_t>& sizes, Scope scope) {
  std::vector<PeerMessage> transfers;
  for (int q : processes(scope)) {
    if (q == rank()) continue;
    if (sizes.at(q) > 0) transfers.push_back({q, out.at(q), sizes[q], true});
    if (bytes > 0) transfers.push_back({q, const_cast<void*>(mine), bytes, false});
  }
  exchange(transfers, scope);
}

void ProcessMesh::broadcast(void* data, size_t bytes, int root, Scope scope) {
  if (bytes == 0) return;
  std::vector<PeerMessage> transfers;
  if (rank() == root) {
    for (int q : processes(scope)) {
      if (q != root) transfers.push_back({q, data, bytes, false});
    }
  } else {
    transfers.push_back({root, data, bytes, true});
  }
  exchange(transfers, scope);
}

void ProcessMesh::set_members(std::vector<int> processes) {
  // A process that sat out exchanges among members has counted fewer: all
  // go on from the count of those that took part.
  const uint64_t count = highest(exchanges_[1]);
  std::lock_guard<std::mutex> exclusive(exchange_mutex_);
  exchanges_[1] = count;
  members_ = std::move(processes);
}

uint64_t ProcessMesh::highest(uint64_t mine) {
  std::vector<uint64_t> values(size(), 0);
  std::vector<void*> out;
  for (auto& v : values) out.push_back(&v);
  all_gather(&mine, sizeof mine, out, std::vector<size_t>(size(), sizeof mine));
  values[rank()] = mine;
  return *std::max_element(values.begin(), values.end());
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

}  // namespace exogym::runtime::dist
