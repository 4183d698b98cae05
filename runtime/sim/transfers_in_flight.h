#pragma once
// A node's strategy transfers in flight: the non-blocking collectives
// (sdk::Pending, sdk/pending.h) it started and has not waited for yet, with the
// times the simulated clock needs at wait() (node_meter.h), and whether a
// handle still holds each, so that a handle dropped or forgotten is an error
// that names its collective instead of a clock that silently skips it.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "exogym/runtime/sim/network_model.h"

namespace exogym::runtime::sim {

struct Transfer {
  uint64_t id = 0;  // the strategy collective's sequence number (clock_exchange.h)
  CollectiveKind kind = CollectiveKind::AllReduce;
  int64_t step = -1;   // the 0-based step that started it (-1: the strategy's init())
  double start = 0;    // when the collective can start: the last node's arrival (plus a failure timeout)
  double begin = 0;    // when the node's link takes it up: at `start`, or when its earlier transfers end
  double finish = 0;   // begin + seconds: when it ends, the same on every node
  double seconds = 0;  // its modelled transfer time
};

// The time `t` keeps the link busy between `from` and `to`: all of
// t.seconds (exactly) when it lies within.
double busy_within(const Transfer& t, double from, double to);

// Used by its node's thread; the handles the strategies still hold when
// they are destroyed (on the main thread, after every node finished) mark
// theirs abandoned.
class TransfersInFlight {
 public:
  // A transfer that a new handle holds; returns the ticket the handle
  // names it by (tickets are never reused, unlike ids after a failure).
  uint64_t add(const Transfer& transfer);
  // A transfer a checkpoint or a donor recorded, held by a new handle: the
  // entry restore() put back with that id (which must match `transfer`), or
  // a new one. sdk::Error when another handle holds it already.
  uint64_t claim(const Transfer& transfer);
  // The transfer that handle `ticket` holds, taken out: sdk::Error when it
  // is no longer in flight (its node failed since it started).
  Transfer take(uint64_t ticket);
  // The transfer handle `ticket` holds; null when none.
  const Transfer* find(uint64_t ticket) const;
  // Handle `ticket` was destroyed without wait(). Never throws: check()
  // reports it.
  void abandon(uint64_t ticket) noexcept;
  // At the end of a step: sdk::Error for a transfer whose handle was
  // dropped, or that a resumed run's strategy did not take back. A transfer
  // may stay in flight past the run's last step: the node lands it then
  // (NodeMeter::land_transfers).
  void check() const;
  // The node failed: its transfers are lost with its memory.
  void clear() { entries_.clear(); }

  // Every transfer in flight, in the order they started.
  std::vector<Transfer> transfers() const;

  // Checkpoints: the transfers, each as an object; restore() puts them
  // back unclaimed, for the resumed strategy's load_state to claim.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);
  // std::invalid_argument naming what is wrong in `state`.
  static void check_state(const nlohmann::json& state);

 private:
  enum class Hold { Held, Abandoned, Unclaimed };
  struct Entry {
    Transfer transfer;
    uint64_t ticket = 0;
    Hold hold = Hold::Held;
  };
  Entry* entry(uint64_t ticket);

  std::vector<Entry> entries_;  // in the order they started: a handful at most
  uint64_t next_ticket_ = 1;
};

}  // namespace exogym::runtime::sim
