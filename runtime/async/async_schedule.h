#pragma once
// The simulated time of an asynchronous strategy (sdk/async.h) in one
// process: which node computes in which slot, the updates in flight to the
// server, and the replies on their way back.
//
// Slots. The run's step t is the slot [t·q, (t+1)·q) of simulated time,
// q = compute.step_time / the fastest node's speed. A node computes in slot
// t when it waits for no reply and its clock is in the slot; each step moves
// its clock by step_time / its speed (at least q). So a node's clock is at
// least t·q at the start of slot t, and a step computed in slot t ends no
// earlier than (t+1)·q.
//
// Order. Between slots t and t+1 every node of the process waits while one
// thread sends the updates of slot t (they leave at their step's end over
// the sender's link) and hands the server, in order of arrival (rank on
// ties), every update that arrives before slot t+2: any later step ends at
// (t+2)·q or after, so no update can still arrive before those. Updates that
// arrive at the same time reach the server together; each sender's reply
// then leaves over its link, and the node takes it in the slot it arrives in.
// Nothing depends on the threads' timing: the same manifest gives the same
// run.
//
// Several processes. Each process keeps a schedule and a server of its own
// and hosts some of the nodes. At each meeting between slots the processes
// first tell each other what their nodes did (share_with(): the updates
// that left, with their arrival times from the senders' clocks, the nodes
// that came back, the steps computed); every process then hands its server
// every update in the same order, so the servers stay alike, and keeps the
// replies to its own nodes. The same run as in one process, bit for bit.
//
// A population (participation.clients above the nodes, as FedBuff samples
// its concurrent clients): each node is a slot that trains one client at a
// time and takes on a new one as the server replies to its update, before
// the reply leaves (the new client downloads the model over its own link
// and computes at its own speed). The new client is drawn uniformly from
// the slot's share of the population (the clients c with c mod nodes =
// rank: no two slots ever train one client), from the run's seed, the rank
// and the steps the slot has computed; every process draws the same, and a
// resumed run continues the same draws.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exogym/runtime/dist/world.h"
#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/sdk/async.h"
#include "exogym/sdk/node.h"

namespace exogym::runtime::async {

// Why a run cannot be asynchronous: the manifest's field and the reason.
struct AsyncRefusal {
  std::string path, message;
};

class AsyncSchedule {
 public:
  // An update on its way to the server.
  struct InFlight {
    int rank = 0;
    double arrival = 0, upload = 0;  // simulated seconds
    int64_t base_version = 0;
    int64_t life = 0;  // the sender's comebacks when it sent
    std::vector<at::Tensor> tensors;
  };
  // What a node of this process did since the last meeting, for the other
  // processes: its comebacks and steps, whether it came back and asks for
  // the server's model (from that time on its clock), and the update that
  // left in the slot just ended (`sent`), or after a resume the one it has
  // in flight.
  struct NodeNews {
    int rank = 0;
    int64_t life = 0, steps_computed = 0;
    std::optional<double> pull_from;
    bool sent = false;
    std::optional<InFlight> update;
  };
  // Gives every process's news to every process, in rank order (all
  // processes call it at the meeting; async/async_processes.h).
  using ShareNews = std::function<std::vector<NodeNews>(std::vector<NodeNews> mine)>;

  // `speed` and `step_time` as the compute model's (nullopt: measured, which
  // check_runnable() refuses); `refusal`: set when something else in the
  // run rules asynchrony out. `block`: the nodes this process hosts.
  AsyncSchedule(std::optional<double> step_time, std::vector<double> speed, const sim::NetworkModel& network,
                std::optional<AsyncRefusal> refusal, dist::NodeBlock block);
  ~AsyncSchedule();
  // Over several processes, before training: how the news travels.
  void share_with(ShareNews share) { share_ = std::move(share); }

  // A population of clients (see above): `take(rank, client)` gives node
  // `rank` the client's data, speed and bandwidth and returns the speed;
  // the slots' length follows `fastest_speed`, the fastest client's.
  struct Population {
    int clients = 0;
    uint64_t seed = 0;
    double fastest_speed = 1;
    std::function<double(int rank, int client)> take;
  };
  // Before the first slot, while every node waits: each node takes on its
  // first client, or `current`'s (a resumed run's, by rank) when given.
  void use_population(Population population, const std::vector<int>* current);

  // The link of node `rank` (its NodeContext::async).
  sdk::AsyncLink& link(int rank);
  // Whether any node's strategy connected: the run is asynchronous.
  bool running() const { return server_ != nullptr; }
  // The steps node `rank` computed so far; and all nodes of the process
  // together as of the last meeting between slots (examples trained = that
  // times the batch size; a count the other nodes' next slots do not move).
  int64_t steps_computed(int rank) const { return nodes_.at(static_cast<size_t>(rank)).steps_computed; }
  int64_t steps_computed() const { return computed_at_meeting_; }
  // Whether node `rank`'s strategy connected (in init()): its run goes by slots.
  bool connected(int rank) const { return static_cast<bool>(nodes_.at(static_cast<size_t>(rank)).on_reply); }

  // After init(), when some node connected: sdk::ConfigError naming the
  // manifest's field when the run cannot be asynchronous (no fixed
  // compute.step_time, participation).
  void check_runnable() const;
  // At the start of slot t, on node `rank`'s thread: hands the node its
  // reply if it arrives by the end of the slot (the handler runs here), then
  // says whether the node computes a step in the slot (and counts it).
  bool begin_slot(int rank, int64_t t, sim::NodeMeter& meter);
  // Between slots t and t + 1, once for the process while its nodes wait.
  // `meter(rank)` gives a node's meter; `metrics` gets each update's
  // staleness (the server versions its sender had not seen) at step t + 1.
  void between_slots(int64_t t, const std::function<sim::NodeMeter&(int)>& meter, sdk::MetricSink* metrics);
  // Failures (docs/simulation.md#failures-and-churn): node `rank` comes
  // back, after the runtime's recovery, on its thread before its first
  // slot. It forgets what it waited for and asks the server for its
  // current model, which reaches it over its link; until then it computes
  // nothing. Its update still in flight arrives, without reply.
  void rejoin(int rank);

  // Checkpoints, at a step boundary (every update of the slot has left):
  // node `rank`'s update in flight or reply on its way, the version its
  // round started from, its steps and comebacks, as tensors ("update.<i>", "reply.<i>") and `meta`;
  // with `server`, also the server's state ("server.<key>"). restore_node
  // puts them back before the first resumed slot, on the node's thread.
  void save_node(int rank, bool server, std::map<std::string, at::Tensor>& tensors, nlohmann::json& meta) const;
  void restore_node(int rank, bool server, const std::map<std::string, at::Tensor>& tensors,
                    const nlohmann::json& meta);
  // Whether `meta` and `tensors` are what save_node writes: every field of
  // its type, counts and versions not negative, times finite and not
  // negative, the tensors it counts present. std::invalid_argument naming
  // the field otherwise, so that a resume skips such a checkpoint before
  // anything changes (async_state_check.cpp).
  static void check_node_state(const std::map<std::string, at::Tensor>& tensors, const nlohmann::json& meta);
  // After the last slot, likewise: every update in flight arrives and every
  // reply is taken, so the run ends when its data has arrived.
  void drain(int64_t steps, const std::function<sim::NodeMeter&(int)>& meter, sdk::MetricSink* metrics);

 private:
  class NodeLink;
  struct ScheduledNode {
    std::function<void(const sdk::AsyncReply&)> on_reply;
    std::vector<at::Tensor> to_send;  // sent at the end of this slot
    bool sending = false, awaiting = false;
    // `pull`: the node came back and asks the server for its model at the
    // next meeting; `life` counts its comebacks, and a reply to an update
    // of an earlier life is lost with the node's memory.
    bool pull = false;
    int64_t base_version = 0, steps_computed = 0, life = 0;
    std::optional<sdk::AsyncReply> reply;
    double reply_arrival = 0, reply_bytes = 0, reply_time = 0;
  };

  int64_t slot_of(double time) const;
  // With a population: node `rank` takes on the client drawn after
  // `steps` steps (population_->take).
  void next_client(int rank, int64_t steps);
  // Hands node `rank` its reply if it arrives by the end of slot t.
  void take_reply_by(int rank, int64_t t, sim::NodeMeter& meter);
  // The server's reply to node `rank`, leaving at `from` over its link.
  void send_reply(int rank, double from, const std::function<sim::NodeMeter&(int)>& meter);
  // This process's news; then everyone's, applied (the pulls' replies, the
  // updates that leave).
  std::vector<NodeNews> local_news(const std::function<sim::NodeMeter&(int)>& meter);
  void apply_news(const std::vector<NodeNews>& news, const std::function<sim::NodeMeter&(int)>& meter);
  // Every node of the process learns of an update or reply (the cluster's bytes).
  void note_traffic(sim::CollectiveKind kind, double bytes, double seconds,
                    const std::function<sim::NodeMeter&(int)>& meter) const;
  void connect(int rank, std::shared_ptr<sdk::AsyncServer> server,
               std::function<void(const sdk::AsyncReply&)> on_reply);
  void send(int rank, std::vector<at::Tensor> update);
  // The sends of the slot just ended leave, the nodes that came back ask
  // for the model, and the server takes the updates that arrive before
  // slot `before_slot` (every one: nullopt), recorded at step `row`.
  void deliver(std::optional<int64_t> before_slot, int64_t row, const std::function<sim::NodeMeter&(int)>& meter,
               sdk::MetricSink* metrics);

  std::optional<double> step_time_;
  std::vector<double> speed_;
  double fastest_ = 1, slot_ = 0;
  const sim::NetworkModel& network_;
  std::optional<AsyncRefusal> refusal_;
  std::optional<Population> population_;
  std::mutex mutex_;  // connect()'s, on the nodes' threads
  std::shared_ptr<sdk::AsyncServer> server_;
  std::vector<std::unique_ptr<NodeLink>> links_;  // by rank
  std::vector<ScheduledNode> nodes_;              // by rank
  std::vector<InFlight> in_flight_;               // every node's, in the order sent
  int64_t computed_at_meeting_ = 0;
  dist::NodeBlock block_;
  ShareNews share_;  // null: one process
  // Restored from a checkpoint: the next meeting tells the other processes
  // of this process's updates in flight.
  bool restored_ = false;
};

}  // namespace exogym::runtime::async
