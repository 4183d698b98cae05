#pragma once
// One node's communication counters and simulated clock.
//
// The clock advances by the node's compute time (measured, or fixed by the
// manifest, divided by the node's speed factor), and a strategy collective
// ends for every node at the slowest node's arrival (clock_exchange.h) plus
// the modelled transfer time (network_model.h). Time spent before that end
// is the node's waiting time. Runtime traffic is counted but moves no clock
// (traffic_source.h).
//
// A non-blocking collective (sdk::Pending) is scheduled the same way but
// leaves the clock where it is: its transfer runs while the node computes,
// and wait_transfer() moves the clock to its end if that is later. The
// node's link carries its transfers one at a time, in the order they
// started, blocking ones included: a transfer begins at the collective's
// start or when the link is free, whichever is later. Since every node
// takes part in every collective, the link is free at the same time on
// every node. When the clock jumps to a transfer's end, the part of the
// jump during which the link carried the node's transfers is
// communication, the rest waiting; the transfer time that never showed on
// the clock is hidden (docs/simulation.md#overlapping-communication-with-compute).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "exogym/runtime/sim/clock_exchange.h"
#include "exogym/runtime/sim/comm_row.h"
#include "exogym/runtime/sim/compute_model.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/traffic_source.h"
#include "exogym/runtime/sim/transfers_in_flight.h"

namespace exogym::runtime::sim {

// What a node that comes back after a failure takes from its donor's meter
// (plain data: it travels between processes as bytes).
struct DonorView {
  double clock = 0;
  uint64_t sequence = 0;
  double cluster_sent[2] = {0, 0};  // by TrafficSource
  double link_free = 0;             // when the last strategy transfer ends
  double group_view_sent = 0;       // of cluster_sent[0], from subgroups
};

// Used by its node's thread only, except for the read-outs after the run.
class NodeMeter {
 public:
  // `keep_rows`: gather comm.csv rows (one node's suffice: every node sees
  // every collective's totals).
  NodeMeter(int rank, const NetworkModel& network, const ComputeModel& compute, ClockExchange& clocks,
            bool keep_rows = false);

  int rank() const { return rank_; }
  const NetworkModel& network() const { return network_; }

  // The number of steps completed, for comm.csv rows of runtime traffic
  // (evaluation at the start of step t is row t, as in validation.csv).
  void set_completed_steps(int64_t steps) { row_step_ = steps; }
  // The training loop brackets the compute of 0-based step t (zero_grad,
  // forward, backward, the strategy's step) with these; its collectives are
  // comm.csv row t + 1, as in train.csv. A step the node does not compute
  // (`computes` false: Strategy::computes) adds no compute to its clock.
  // end_step throws sdk::Error for a non-blocking collective whose handle
  // was dropped without wait() during the step (transfers_in_flight.h).
  void begin_step(int64_t step, bool computes = true);
  void end_step();
  // Stacked execution (train/node_stacks.h): the node stops timing its
  // compute while it waits for its stack's forward and backward, which are
  // computed once for several nodes, then counts `share_seconds` of that
  // computation as its own and times on. No effect with a fixed step time.
  void pause_compute() { stop_timer(); }
  void resume_compute(double share_seconds);
  // After the run's last step and its last checkpoint, which keeps them in
  // flight (a run extended from it waits for them where its strategy
  // does): the transfers still in flight land, the clock moving to the end
  // of the last as wait() would, so that the run ends when its data has
  // arrived. Their handles may then be destroyed without wait().
  void land_transfers();

  // MeteredCommunicator's hooks around every collective.
  void before_collective(TrafficSource source);
  void after_collective(TrafficSource source, CollectiveKind kind, Traffic mine, double cluster_sent,
                        double transfer_time);
  // A collective over a subgroup (sdk/comm.h): before the call, the node
  // posts its arrival (the failure timeout it still has to lose included);
  // after it, the transfer starts at the members' latest arrival
  // (ClockExchange::group_latest) or when the link is free, and the clock
  // moves to its end. It takes no collective sequence number: the other
  // nodes do not take part. `cluster_sent`: what the node's view of the
  // cluster's bytes adds; `group_sent`: what the group's members sent.
  void before_group(TrafficSource source);
  void after_group(TrafficSource source, CollectiveKind kind, Traffic mine, double cluster_sent, double transfer_time);
  // A non-blocking strategy collective, instead of after_collective: counted
  // alike, scheduled on the node's link, the clock left where it is.
  // Returns the ticket of its handle.
  uint64_t start_transfer(CollectiveKind kind, Traffic mine, double cluster_sent, double transfer_time);
  // Its handle's wait(): the clock moves to the transfer's end if later.
  void wait_transfer(uint64_t ticket);
  // A transfer a checkpoint or a donor recorded, in flight again for a new
  // handle (TransfersInFlight::claim); its ticket.
  uint64_t resume_transfer(const Transfer& transfer) { return in_flight_->claim(transfer); }
  // What the handles of this node's transfers refer to (shared, since a
  // strategy may outlive the meter).
  const std::shared_ptr<TransfersInFlight>& in_flight() const { return in_flight_; }

  // Asynchronous strategies (sdk/async.h). send_update: the node's update
  // leaves at the end of its step over its link; returns its arrival at the
  // server. The node's clock stays: it waits for the reply, which
  // take_reply() hands it, the clock moving to `arrival` (the time on the
  // link both ways is communication, the rest waiting).
  double send_update(double bytes, double transfer_time);
  void take_reply(double bytes, double arrival, double transfer_time);
  // The cluster's view of an update or reply some node of the process sent
  // (every node learns it at the meeting between slots).
  void note_server_traffic(CollectiveKind kind, double bytes, double transfer_time);

  // Failures (fault_schedule.h). A survivor of a failure loses `seconds`
  // noticing it, at its next strategy collective (network.failure_timeout);
  // failures before that collective overlap, so the loss is not added up.
  void expect_failure_timeout(double seconds) { failure_timeout_ = std::max(failure_timeout_, seconds); }
  // A node that comes back continues from its donor's clock plus the
  // `transfer` of the state, at the donor's collective count, and takes the
  // donor's view of the cluster's traffic (cluster_sent), which it missed.
  void rejoin(const DonorView& donor, double transfer);
  DonorView donor_view() const;

  double clock() const { return clock_; }
  double compute_seconds() const { return compute_; }
  double communication_seconds() const { return communication_; }
  double waiting_seconds() const { return waiting_; }
  // The strategy's transfer time that overlapped the node's compute.
  double hidden_seconds() const { return std::max(0.0, transfer_ - communication_); }
  const Traffic& traffic(TrafficSource source) const { return traffic_[index(source)]; }
  // Bytes sent by all nodes together, as far as this node has seen (every
  // node sees every collective, so all nodes agree; a subgroup's collective
  // counts as if every live node were in a group like the node's:
  // docs/simulation.md#subgroups-and-peers).
  double cluster_sent(TrafficSource source) const { return cluster_sent_[index(source)]; }
  // Of cluster_sent, what collectives over subgroups added; and the bytes
  // this node sent in them (exact: summed over the nodes at the end).
  double group_view_sent() const { return group_view_sent_; }
  double group_sent() const { return group_sent_; }
  int64_t collectives(TrafficSource source) const { return calls_[index(source)]; }
  // The most strategy bytes this node sent in one step (one comm.csv row
  // step): what its link must carry at the peak, against the mean
  // traffic().sent / steps.
  double peak_step_sent() const { return peak_step_sent_; }

  // Checkpoints: the counters, clocks and collective sequence number at a
  // step boundary (no rows pending), and putting them back when a run
  // resumes, before its first resumed step (the clock exchange is restored
  // apart, ClockExchange::restore). Doubles round-trip exactly.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);
  // Whether `state` is one restore() reads: std::invalid_argument naming the
  // field otherwise (a checkpoint is checked before anything changes).
  static void check_state(const nlohmann::json& state);
  uint64_t sequence() const { return sequence_; }

  // The comm.csv rows gathered since the last call, in the order of each
  // row's first collective.
  std::vector<CommRow> take_rows();

 private:
  static int index(TrafficSource source) { return source == TrafficSource::Strategy ? 0 : 1; }
  void stop_timer();
  void settle_compute();
  void record_row(TrafficSource source, CollectiveKind kind, double cluster_sent, double transfer_time);
  void count(TrafficSource source, CollectiveKind kind, Traffic mine, double cluster_sent, double transfer_time);
  // Strategy bytes this node sent in the current row step, for the peak.
  void add_step_sent(double bytes);
  // The transfer of the strategy collective just met: when it starts,
  // begins and ends. Takes the collective's sequence number and the
  // failure timeout, and occupies the link.
  Transfer schedule(CollectiveKind kind, double transfer_time);
  Transfer schedule_from(CollectiveKind kind, double start, double transfer_time);
  // A blocking transfer: the clock moves to its end.
  void take(const Transfer& t);
  // The time the link carries transfers in flight between `from` and `to`.
  double busy_between(double from, double to) const;
  void restart_timer();

  const int rank_;
  const NetworkModel& network_;
  const ComputeModel& compute_model_;
  ClockExchange& clocks_;
  // The node's speed factor, read at each step: an availability trace
  // changes it between rounds (train::Meters::apply_clients).
  double speed() const {
    return static_cast<size_t>(rank_) < compute_model_.speed.size() ? compute_model_.speed[rank_] : 1.0;
  }
  const bool keep_rows_;

  int64_t row_step_ = 0;
  bool in_step_ = false;
  bool idle_ = false;  // in a step the node does not compute
  bool timing_ = false;
  std::chrono::steady_clock::time_point timer_start_;
  double pending_compute_ = 0;

  double clock_ = 0, compute_ = 0, communication_ = 0, waiting_ = 0;
  double transfer_ = 0;   // the strategy's modelled transfer time, all of it
  double link_free_ = 0;  // when the link has carried every transfer started
  std::shared_ptr<TransfersInFlight> in_flight_ = std::make_shared<TransfersInFlight>();
  double failure_timeout_ = 0;  // to lose at the next strategy collective
  // An asynchronous update's time on the link, until its reply comes.
  double awaiting_link_ = 0;
  uint64_t sequence_ = 0;
  Traffic traffic_[2];
  double cluster_sent_[2] = {0, 0};
  double group_view_sent_ = 0, group_sent_ = 0;  // strategy traffic only
  int64_t calls_[2] = {0, 0};
  std::vector<CommRow> rows_;  // one per (step, source, kind); a handful per step
  // Strategy bytes sent in row step `step_sent_row_` so far, and the most
  // of any step (checkpointed: a step never spans a checkpoint).
  int64_t step_sent_row_ = -1;
  double step_sent_ = 0, peak_step_sent_ = 0;
};

}  // namespace exogym::runtime::sim
