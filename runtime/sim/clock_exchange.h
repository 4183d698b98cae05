#pragma once
// Where every node posts its arrival time at a strategy collective, so that
// each can read the latest one: a collective ends for every node at the
// slowest node's arrival plus the transfer time (node_meter.h).
//
// Two slots suffice: a node cannot post for collective n+2 before every node
// has entered collective n+1, by which time all have read collective n's
// arrivals.
//
// When the nodes live in several processes, each process sees only its own
// nodes' posts: the hierarchical backend takes this process's latest arrival
// (take_local) before it exchanges data with the other processes, sends it
// along, and records the latest over all processes (share_latest), which
// latest() then includes. So the clocks are the same as in one process.
#include <cstdint>
#include <optional>
#include <vector>

namespace exogym::runtime::sim {

class ClockExchange {
 public:
  explicit ClockExchange(int nodes);
  void post(int rank, uint64_t sequence, double arrival);
  // The latest arrival at collective `sequence`; valid once the collective's
  // rendezvous has completed.
  double latest(uint64_t sequence) const;

  struct Local {
    uint64_t sequence = 0;
    double latest = 0;
  };
  // The collective that nodes `ranks` (this process's live nodes) have all
  // posted their arrival for and that has not been taken yet, with their
  // latest arrival; nullopt when they posted nothing new (a collective of
  // runtime traffic, which moves no clock). Called once per collective, by
  // one thread, after every one of them has entered it.
  std::optional<Local> take_local(const std::vector<int>& ranks);
  // The latest arrival at `sequence` over every process.
  void share_latest(uint64_t sequence, double latest);

  // A resumed run, before its nodes start: every node has taken part in
  // `sequence` strategy collectives, all of them completed.
  void restore(uint64_t sequence);
  // Collectives over a subgroup (sdk/comm.h's group_all_reduce, exchange)
  // take no sequence number: only their members meet. Each member posts its
  // arrival before it calls; the group's work, once every member has
  // arrived, records their latest arrival for each member (over several
  // processes, the members' latest sent along with the data), which the
  // member reads after the call. Only the member's own calls touch its
  // entries, and the meeting orders the writes before the reads.
  void post_group(int rank, double arrival) { group_arrival_[rank] = arrival; }
  double group_arrival(int rank) const { return group_arrival_[rank]; }
  void set_group_latest(int rank, double latest) { group_latest_[rank] = latest; }
  double group_latest(int rank) const { return group_latest_[rank]; }

  // Node `rank` comes back after a failure, between collectives: like the
  // live nodes, it has seen `sequence` strategy collectives (this process
  // may have sat the last ones out).
  void rejoin(int rank, uint64_t sequence);

 private:
  std::vector<double> slots_[2];
  std::vector<double> group_arrival_, group_latest_;  // per rank
  std::vector<uint64_t> posted_;                      // per rank: 1 + the last sequence it posted (0: none)
  uint64_t taken_ = 0;                                // sequences take_local has handed out
  double shared_[2] = {0, 0};
  uint64_t shared_sequence_[2] = {UINT64_MAX, UINT64_MAX};
};

}  // namespace exogym::runtime::sim
