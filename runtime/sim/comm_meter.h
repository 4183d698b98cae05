#pragma once
// Exact communication accounting and the simulated network clock.
//
// Every node's communicator is wrapped in a MeteredCommunicator, so bytes are
// counted by the runtime, at each tensor's real dtype and size, and no
// strategy counts anything itself. Each node also keeps a virtual clock:
// it advances by the node's compute time (measured, or fixed by the
// manifest, divided by the node's speed factor), and a collective ends for
// every node at the slowest node's arrival plus the modelled transfer time
// (network_model.h). Time spent before that end is the node's waiting time.
//
// Traffic has two sources. The strategy's is what a real cluster would send.
// The runtime's own (the initial broadcast of node 0's weights, the averaging
// behind the global evaluation and the final model) is a simulator artefact:
// it is counted separately and does not advance the clocks.
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "exogym/runtime/sim/network_model.h"
#include "exogym/sdk/comm.h"

namespace exogym::runtime::sim {

enum class TrafficSource { Strategy, Runtime };

const char* to_string(TrafficSource source);

struct ComputeModel {
  std::optional<double> step_time;  // seconds per step at speed 1; nullopt: measure each node's compute
  std::vector<double> speed;        // per rank; 2 = twice as fast, 0.5 = half as fast
};

// Where every node posts its arrival time at a strategy collective, so that
// each can read the latest one. Two slots suffice: a node cannot post for
// collective n+2 before every node has entered collective n+1, by which time
// all have read collective n's arrivals.
//
// When the nodes live in several processes, each process sees only its own
// nodes' posts: the hierarchical backend takes this process's latest arrival
// (take_local) before it exchanges data with the other processes, sends it
// along, and records the latest over all processes (share_latest), which
// latest() then includes. So the clocks are the same as in one process.
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
  // The collective that nodes [first, first + count) have all posted their
  // arrival for and that has not been taken yet, with their latest arrival;
  // nullopt when they posted nothing new (a collective of runtime traffic,
  // which moves no clock). Called once per collective, by one thread, after
  // every local node has entered it.
  std::optional<Local> take_local(int first, int count);
  // The latest arrival at `sequence` over every process.
  void share_latest(uint64_t sequence, double latest);

 private:
  int nodes_;
  std::vector<double> slots_[2];
  std::vector<uint64_t> posted_;  // per rank: 1 + the last sequence it posted (0: none)
  uint64_t taken_ = 0;            // sequences take_local has handed out
  double shared_[2] = {0, 0};
  uint64_t shared_sequence_[2] = {UINT64_MAX, UINT64_MAX};
};

// One row of comm.csv: the collectives of one kind and source in one step,
// summed over all nodes.
struct CommRow {
  int64_t step = 0;
  TrafficSource source = TrafficSource::Strategy;
  CollectiveKind kind = CollectiveKind::AllReduce;
  int64_t calls = 0;
  double bytes_sent = 0;  // all nodes together
  double time_s = 0;      // modelled transfer time (strategy traffic only)
};

// One node's counters and clock. Used by its own thread only, except for the
// read-outs after the run.
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
  // comm.csv row t + 1, as in train.csv.
  void begin_step(int64_t step);
  void end_step();

  // MeteredCommunicator's hooks around every collective.
  void before_collective(TrafficSource source);
  void after_collective(TrafficSource source, CollectiveKind kind, Traffic mine, double cluster_sent,
                        double transfer_time);

  double clock() const { return clock_; }
  double compute_seconds() const { return compute_; }
  double communication_seconds() const { return communication_; }
  double waiting_seconds() const { return waiting_; }
  const Traffic& traffic(TrafficSource source) const { return traffic_[index(source)]; }
  // Bytes sent by all nodes together, as far as this node has seen (every
  // node sees every collective, so all nodes agree).
  double cluster_sent(TrafficSource source) const { return cluster_sent_[index(source)]; }
  int64_t collectives(TrafficSource source) const { return calls_[index(source)]; }

  // The comm.csv rows gathered since the last call, in the order of each
  // row's first collective.
  std::vector<CommRow> take_rows();

 private:
  static int index(TrafficSource source) { return source == TrafficSource::Strategy ? 0 : 1; }
  void stop_timer();
  void settle_compute();
  void record_row(TrafficSource source, CollectiveKind kind, double cluster_sent, double transfer_time);

  const int rank_;
  const NetworkModel& network_;
  const ComputeModel& compute_model_;
  ClockExchange& clocks_;
  const double speed_;
  const bool keep_rows_;

  int64_t row_step_ = 0;
  bool in_step_ = false;
  bool timing_ = false;
  std::chrono::steady_clock::time_point timer_start_;
  double pending_compute_ = 0;

  double clock_ = 0, compute_ = 0, communication_ = 0, waiting_ = 0;
  uint64_t sequence_ = 0;
  Traffic traffic_[2];
  double cluster_sent_[2] = {0, 0};
  int64_t calls_[2] = {0, 0};
  std::vector<CommRow> rows_;  // one per (step, source, kind); a handful per step
};

// A communicator that counts what passes through `inner` and moves the
// node's clock.
class MeteredCommunicator final : public sdk::Communicator {
 public:
  MeteredCommunicator(sdk::Communicator& inner, NodeMeter& meter, TrafficSource source)
      : inner_(inner), meter_(meter), source_(source) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void all_reduce(std::vector<at::Tensor>& tensors, sdk::ReduceOp op) override;
  void broadcast(std::vector<at::Tensor>& tensors, int root) override;
  std::vector<std::vector<at::Tensor>> all_gather(const std::vector<at::Tensor>& tensors) override;
  void barrier() override;

  using sdk::Communicator::all_gather;
  using sdk::Communicator::all_reduce;
  using sdk::Communicator::broadcast;

 private:
  sdk::Communicator& inner_;
  NodeMeter& meter_;
  TrafficSource source_;
};

// Bytes of the tensors' data at their dtype.
double payload_bytes(const std::vector<at::Tensor>& tensors);

}  // namespace exogym::runtime::sim
