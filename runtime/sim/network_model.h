#pragma once
// What a collective would cost on a real cluster: the bytes each node sends
// and receives, and the time the transfer takes, under the textbook
// algorithm for each collective and an alpha-beta (latency + size/bandwidth)
// model of every message. The in-process backend moves no bytes at all;
// these numbers are what the same calls would cost between machines.
//
// Algorithms, for K nodes and a payload of S bytes per node:
//  - all_reduce: ring (reduce-scatter, then all-gather) in 2(K-1) steps of
//    S/K bytes: each node sends and receives 2(K-1)/K * S;
//    time 2(K-1) * (latency + S / (K * bandwidth)).
//  - broadcast: a pipelined chain from the root (root -> root+1 -> ...):
//    every node but the last sends S, every node but the root receives S;
//    time (K-1) * latency + S / bandwidth.
//  - all_gather: ring; node r sends every block but its successor's and
//    receives every block but its own: with equal blocks, (K-1) * S each;
//    time (K-1) * latency + (largest amount a node sends) / bandwidth.
//  - barrier: no payload; a dissemination barrier of ceil(log2 K) rounds
//    costs ceil(log2 K) * latency.
//  - exchange (two nodes): one message each way at once: each sends its
//    payload and receives the peer's; time latency + larger payload / bandwidth.
//  - all_to_all: each node sends each other node its part directly, K-1
//    messages: it sends the parts for the others and receives theirs for it;
//    time (K-1) * latency + (largest amount a node sends) / bandwidth, as
//    the ring all_gather's.
// A collective over every node runs at the pace of the slowest link: the
// model uses the smallest bandwidth and the largest latency among the nodes.
// One over a subgroup (group_all_reduce, group_all_gather: the ring over its
// g members; exchange) uses its members' slowest link.
#include <map>
#include <vector>

namespace exogym::runtime::sim {

// The last three run over a subgroup of the nodes (sdk/comm.h).
enum class CollectiveKind {
  AllReduce,
  Broadcast,
  AllGather,
  Barrier,
  GroupAllReduce,
  GroupAllGather,
  Exchange,
  // An asynchronous strategy's update to its server, and the server's reply.
  ServerUpdate,
  ServerReply,
  // Last, so that the saved numbers of the others stay.
  AllToAll
};

const char* to_string(CollectiveKind kind);

struct Link {
  double bandwidth = 0;  // bytes per second, > 0
  double latency = 0;    // seconds, >= 0
};

// Bytes one node sends and receives in one collective.
struct Traffic {
  double sent = 0, received = 0;
};

// `bytes` is each node's payload (all_reduce, broadcast) or, for all_gather,
// every rank's payload in rank order.
Traffic all_reduce_traffic(double bytes, int nodes);
Traffic broadcast_traffic(double bytes, int nodes, int rank, int root);
Traffic all_gather_traffic(const std::vector<double>& bytes_by_rank, int rank);
// Bytes sent by all nodes together.
double all_reduce_total_sent(double bytes, int nodes);
double broadcast_total_sent(double bytes, int nodes);
double all_gather_total_sent(const std::vector<double>& bytes_by_rank);

class NetworkModel {
 public:
  // `overrides`: per-node links replacing `link` for those ranks.
  NetworkModel(int nodes, Link link, std::map<int, Link> overrides = {});

  int nodes() const { return nodes_; }
  Link link(int rank) const;
  // The smallest bandwidth and the largest latency over all nodes.
  const Link& bottleneck() const { return bottleneck_; }
  // The same over `ranks` only: a subgroup's collective runs at the pace of
  // its members' slowest link.
  Link bottleneck(const std::vector<int>& ranks) const;

  // Over `nodes` nodes (fewer than nodes() while some are down; the links'
  // bottleneck stays the whole cluster's).
  double all_reduce_time(double bytes, int nodes) const;
  double broadcast_time(double bytes, int nodes) const;
  // `max_sent`: the most bytes any one node sends.
  double all_gather_time(double max_sent, int nodes) const;
  double barrier_time(int nodes) const;
  // Over a subgroup whose bottleneck is `link`: a ring all_reduce or
  // all_gather over `nodes` members, and a pairwise exchange (both
  // directions at once: latency + the larger payload / bandwidth).
  static double all_reduce_time(double bytes, int nodes, const Link& link);
  static double all_gather_time(double max_sent, int nodes, const Link& link);
  static double exchange_time(double larger_bytes, const Link& link);
  // `bytes` one way over `link` (an asynchronous update or its reply).
  static double transfer_time(double bytes, const Link& link) { return link.latency + bytes / link.bandwidth; }
  // Over all nodes.
  double all_reduce_time(double bytes) const { return all_reduce_time(bytes, nodes_); }
  double broadcast_time(double bytes) const { return broadcast_time(bytes, nodes_); }
  double all_gather_time(double max_sent) const { return all_gather_time(max_sent, nodes_); }
  double barrier_time() const { return barrier_time(nodes_); }

  // For an availability trace, between rounds while no collective runs
  // (train::Meters::apply_trace): node `rank`'s bandwidth from now on, and
  // the nodes whose slowest link paces the collectives over every live node
  // (the round's, rather than the whole cluster's: an away client's link
  // carries nothing).
  void set_bandwidth(int rank, double bandwidth);
  void pace_by(const std::vector<int>& ranks) { bottleneck_ = bottleneck(ranks); }

 private:
  int nodes_;
  Link link_;
  std::map<int, Link> overrides_;
  Link bottleneck_;
};

}  // namespace exogym::runtime::sim
