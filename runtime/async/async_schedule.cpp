#include "exogym/runtime/async/async_schedule.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "exogym/runtime/sim/participation.h"
#include "exogym/runtime/sim/payload.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/metric_sink.h"
#include "exogym/sdk/random.h"

namespace exogym::runtime::async {

class AsyncSchedule::NodeLink final : public sdk::AsyncLink {
 public:
  NodeLink(AsyncSchedule& schedule, int rank) : schedule_(schedule), rank_(rank) {}
  void connect(std::shared_ptr<sdk::AsyncServer> server,
               std::function<void(const sdk::AsyncReply&)> on_reply) override {
    schedule_.connect(rank_, std::move(server), std::move(on_reply));
  }
  void send(std::vector<at::Tensor> update) override { schedule_.send(rank_, std::move(update)); }
  double relative_speed() const override { return schedule_.speed_[static_cast<size_t>(rank_)] / schedule_.fastest_; }

 private:
  AsyncSchedule& schedule_;
  const int rank_;
};

AsyncSchedule::AsyncSchedule(std::optional<double> step_time, std::vector<double> speed,
                             const sim::NetworkModel& network, std::optional<AsyncRefusal> refusal,
                             dist::NodeBlock block)
    : step_time_(step_time),
      speed_(std::move(speed)),
      network_(network),
      refusal_(std::move(refusal)),
      nodes_(speed_.size()),
      block_(block) {
  fastest_ = speed_.empty() ? 1.0 : *std::max_element(speed_.begin(), speed_.end());
  if (step_time_) slot_ = *step_time_ / fastest_;
  for (size_t r = 0; r < speed_.size(); ++r) links_.push_back(std::make_unique<NodeLink>(*this, static_cast<int>(r)));
}

AsyncSchedule::~AsyncSchedule() = default;

sdk::AsyncLink& AsyncSchedule::link(int rank) { return *links_.at(static_cast<size_t>(rank)); }

int64_t AsyncSchedule::slot_of(double time) const {
  // Clocks are sums of step times: a clock that should sit on a slot's
  // boundary may be a rounding below it, and must count as the later slot.
  return static_cast<int64_t>(std::floor(time / slot_ + 1e-9));
}

void AsyncSchedule::connect(int rank, std::shared_ptr<sdk::AsyncServer> server,
                            std::function<void(const sdk::AsyncReply&)> on_reply) {
  if (!server) throw sdk::Error("AsyncLink::connect: no server");
  ScheduledNode& node = nodes_.at(static_cast<size_t>(rank));
  if (node.on_reply) throw sdk::Error("AsyncLink::connect: called twice");
  node.on_reply = std::move(on_reply);
  // Every node passes the process's one server (shared_in_process); the
  // first to connect records it. The others connect concurrently.
  std::lock_guard<std::mutex> lock(mutex_);
  if (!server_) {
    server_ = std::move(server);
  } else if (server_ != server) {
    throw sdk::Error("AsyncLink::connect: the nodes passed different servers (make it with sdk::shared_in_process)");
  }
}

void AsyncSchedule::use_population(Population population, const std::vector<int>* current) {
  population_ = std::move(population);
  fastest_ = population_->fastest_speed;
  if (step_time_) slot_ = *step_time_ / fastest_;
  for (size_t r = 0; r < nodes_.size(); ++r) {
    const int rank = static_cast<int>(r);
    if (current) {
      speed_[r] = population_->take(rank, current->at(r));
    } else {
      next_client(rank, 0);
    }
  }
}

void AsyncSchedule::next_client(int rank, int64_t steps) {
  constexpr uint64_t kClientStream = 0x4153594E43434C54ULL;  // "ASYNCCLT"
  const int slots = static_cast<int>(nodes_.size());
  // The clients rank, rank + slots, rank + 2 slots, ... below the population.
  const int share = (population_->clients - 1 - rank) / slots + 1;
  const uint64_t key = sdk::derive_seed(sdk::derive_seed(population_->seed, kClientStream, static_cast<uint64_t>(rank)),
                                        kClientStream, static_cast<uint64_t>(steps));
  const int client = rank + slots * sim::draw_clients(key, share, 1).front();
  speed_[static_cast<size_t>(rank)] = population_->take(rank, client);
}

void AsyncSchedule::check_runnable() const {
  if (!step_time_) {
    throw sdk::ConfigError("compute.step_time",
                           "an asynchronous strategy needs a fixed step time (for example \"compute\": "
                           "{\"step_time\": \"100ms\"}): with measured times the order in which updates arrive, "
                           "and so the run, would change from one run to the next");
  }
  if (refusal_) throw sdk::ConfigError(refusal_->path, refusal_->message);
}

void AsyncSchedule::send(int rank, std::vector<at::Tensor> update) {
  ScheduledNode& node = nodes_.at(static_cast<size_t>(rank));
  if (!node.on_reply) throw sdk::Error("AsyncLink::send before connect");
  if (node.sending || node.awaiting) throw sdk::Error("AsyncLink::send: an update is already on its way");
  node.to_send = std::move(update);
  node.sending = true;
}

bool AsyncSchedule::begin_slot(int rank, int64_t t, sim::NodeMeter& meter) {
  take_reply_by(rank, t, meter);
  ScheduledNode& node = nodes_.at(static_cast<size_t>(rank));
  const bool computes = !node.awaiting && slot_of(meter.clock()) <= t;
  if (computes) ++node.steps_computed;
  return computes;
}

void AsyncSchedule::take_reply_by(int rank, int64_t t, sim::NodeMeter& meter) {
  ScheduledNode& node = nodes_.at(static_cast<size_t>(rank));
  if (node.awaiting && node.reply && slot_of(node.reply_arrival) <= t) {
    meter.take_reply(node.reply_bytes, node.reply_arrival, node.reply_time);
    node.awaiting = false;
    node.base_version = node.reply->version;
    sdk::AsyncReply reply = std::move(*node.reply);
    node.reply.reset();
    node.on_reply(reply);
  }
}

void AsyncSchedule::between_slots(int64_t t, const std::function<sim::NodeMeter&(int)>& meter,
                                  sdk::MetricSink* metrics) {
  deliver(t + 2, t + 1, meter, metrics);
}

void AsyncSchedule::drain(int64_t steps, const std::function<sim::NodeMeter&(int)>& meter, sdk::MetricSink* metrics) {
  deliver(std::nullopt, steps, meter, metrics);
  for (int r = block_.first; r < block_.first + block_.count; ++r) {
    ScheduledNode& node = nodes_[static_cast<size_t>(r)];
    if (!node.awaiting || !node.reply) continue;
    // The last replies land as the last transfers of a synchronous run do.
    take_reply_by(r, slot_of(node.reply_arrival), meter(r));
  }
}

namespace {

void put(std::map<std::string, at::Tensor>& out, const std::string& prefix, const std::vector<at::Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) out[prefix + std::to_string(i)] = tensors[i];
}

std::vector<at::Tensor> take(const std::map<std::string, at::Tensor>& in, const std::string& prefix, int64_t count) {
  std::vector<at::Tensor> out;
  for (int64_t i = 0; i < count; ++i) {
    auto it = in.find(prefix + std::to_string(i));
    if (it == in.end()) throw sdk::Error("asynchronous state: missing tensor " + prefix + std::to_string(i));
    out.push_back(it->second.clone());
  }
  return out;
}

}  // namespace

void AsyncSchedule::save_node(int rank, bool server, std::map<std::string, at::Tensor>& tensors,
                              nlohmann::json& meta) const {
  const ScheduledNode& node = nodes_.at(static_cast<size_t>(rank));
  EXOGYM_CHECK_INTERNAL(!node.sending, "a checkpoint while an asynchronous update is being sent");
  meta = {{"awaiting", node.awaiting},
          {"pull", node.pull},
          {"life", node.life},
          {"base_version", node.base_version},
          {"steps_computed", node.steps_computed},
          {"in_flight", nullptr},
          {"reply", nullptr}};
  for (const auto& f : in_flight_) {
    if (f.rank != rank) continue;
    meta["in_flight"] = {{"arrival", f.arrival},
                         {"upload", f.upload},
                         {"base_version", f.base_version},
                         {"life", f.life},
                         {"count", f.tensors.size()}};
    put(tensors, "update.", f.tensors);
  }
  if (node.reply) {
    meta["reply"] = {{"version", node.reply->version},
                     {"arrival", node.reply_arrival},
                     {"bytes", node.reply_bytes},
                     {"time", node.reply_time},
                     {"count", node.reply->tensors.size()}};
    put(tensors, "reply.", node.reply->tensors);
  }
  if (server) {
    sdk::StateDict state;
    server_->save_state(state);
    for (auto& [key, t] : state) tensors["server." + key] = t;
  }
}

void AsyncSchedule::restore_node(int rank, bool server, const std::map<std::string, at::Tensor>& tensors,
                                 const nlohmann::json& meta) {
  ScheduledNode& node = nodes_.at(static_cast<size_t>(rank));
  node.awaiting = meta.at("awaiting").get<bool>();
  node.pull = meta.at("pull").get<bool>();
  node.life = meta.at("life").get<int64_t>();
  node.base_version = meta.at("base_version").get<int64_t>();
  node.steps_computed = meta.at("steps_computed").get<int64_t>();
  if (const nlohmann::json& r = meta.at("reply"); !r.is_null()) {
    node.reply = sdk::AsyncReply{r.at("version").get<int64_t>(), take(tensors, "reply.", r.at("count").get<int64_t>())};
    node.reply_arrival = r.at("arrival").get<double>();
    node.reply_bytes = r.at("bytes").get<double>();
    node.reply_time = r.at("time").get<double>();
  }
  if (const nlohmann::json& f = meta.at("in_flight"); !f.is_null()) {
    InFlight flight;
    flight.rank = rank;
    flight.arrival = f.at("arrival").get<double>();
    flight.upload = f.at("upload").get<double>();
    flight.base_version = f.at("base_version").get<int64_t>();
    flight.life = f.at("life").get<int64_t>();
    flight.tensors = take(tensors, "update.", f.at("count").get<int64_t>());
    // The nodes restore at the same time; the order of this list does not
    // matter (deliver() sorts by arrival and rank).
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_.push_back(std::move(flight));
    restored_ = true;
  }
  if (server) {
    sdk::StateDict state;
    const std::string prefix = "server.";
    for (const auto& [key, t] : tensors)
      if (key.compare(0, prefix.size(), prefix) == 0) state[key.substr(prefix.size())] = t;
    server_->load_state(state);
  }
}

std::vector<AsyncSchedule::NodeNews> AsyncSchedule::local_news(const std::function<sim::NodeMeter&(int)>& meter) {
  std::vector<NodeNews> news;
  for (int r = block_.first; r < block_.first + block_.count; ++r) {
    ScheduledNode& node = nodes_[static_cast<size_t>(r)];
    NodeNews n;
    n.rank = r;
    n.life = node.life;
    n.steps_computed = node.steps_computed;
    // A node that came back gets the server's model, from its clock on.
    if (std::exchange(node.pull, false)) n.pull_from = meter(r).clock();
    if (node.sending) {
      // The update of the slot just ended leaves, over the sender's link.
      InFlight f;
      f.rank = r;
      f.base_version = node.base_version;
      f.life = node.life;
      const double bytes = sim::payload_bytes(node.to_send);
      f.upload = sim::NetworkModel::transfer_time(bytes, network_.link(r));
      f.arrival = meter(r).send_update(bytes, f.upload);
      f.tensors = std::move(node.to_send);
      node.to_send.clear();
      node.sending = false;
      node.awaiting = true;
      n.sent = true;
      n.update = std::move(f);
    } else if (restored_ && share_) {
      for (const auto& f : in_flight_)
        if (f.rank == r) n.update = f;
    }
    news.push_back(std::move(n));
  }
  restored_ = false;
  return news;
}

void AsyncSchedule::apply_news(const std::vector<NodeNews>& news, const std::function<sim::NodeMeter&(int)>& meter) {
  for (const auto& n : news) {
    ScheduledNode& node = nodes_.at(static_cast<size_t>(n.rank));
    node.life = n.life;
    node.steps_computed = n.steps_computed;
  }
  for (const auto& n : news)
    if (n.pull_from) send_reply(n.rank, *n.pull_from, meter);
  // In rank order, as they left.
  for (const auto& n : news) {
    if (!n.update) continue;
    if (n.sent)
      note_traffic(sim::CollectiveKind::ServerUpdate, sim::payload_bytes(n.update->tensors), n.update->upload, meter);
    // This process's own restored updates are in flight already.
    if (n.sent || !block_.contains(n.rank)) in_flight_.push_back(*n.update);
  }
}

void AsyncSchedule::deliver(std::optional<int64_t> before_slot, int64_t row,
                            const std::function<sim::NodeMeter&(int)>& meter, sdk::MetricSink* metrics) {
  std::vector<NodeNews> news = local_news(meter);
  if (share_) news = share_(std::move(news));
  apply_news(news, meter);
  computed_at_meeting_ = 0;
  for (const auto& node : nodes_) computed_at_meeting_ += node.steps_computed;
  std::vector<InFlight> due, later;
  for (auto& f : in_flight_) {
    (!before_slot || slot_of(f.arrival) < *before_slot ? due : later).push_back(std::move(f));
  }
  in_flight_ = std::move(later);
  std::stable_sort(due.begin(), due.end(), [](const InFlight& a, const InFlight& b) {
    return a.arrival != b.arrival ? a.arrival < b.arrival : a.rank < b.rank;
  });
  for (size_t i = 0; i < due.size();) {
    size_t j = i;
    while (j < due.size() && due[j].arrival == due[i].arrival) ++j;
    std::vector<sdk::AsyncUpdate> arrivals;
    const int64_t version = server_->version();
    for (size_t k = i; k < j; ++k) {
      // Each process records its own nodes' (metrics.csv gathers them).
      if (metrics && block_.contains(due[k].rank))
        metrics->record(due[k].rank, row, "staleness", static_cast<double>(version - due[k].base_version));
      arrivals.push_back({due[k].rank, due[k].arrival, due[k].base_version, std::move(due[k].tensors)});
    }
    server_->receive(arrivals);
    for (size_t k = i; k < j; ++k) {
      // A sender that failed and came back since has forgotten this update.
      const ScheduledNode& sender = nodes_[static_cast<size_t>(due[k].rank)];
      if (due[k].life != sender.life) continue;
      // With a population, the reply goes to the slot's next client.
      if (population_) next_client(due[k].rank, sender.steps_computed);
      send_reply(due[k].rank, due[k].arrival, meter);
    }
    i = j;
  }
}

void AsyncSchedule::send_reply(int rank, double from, const std::function<sim::NodeMeter&(int)>& meter) {
  ScheduledNode& node = nodes_[static_cast<size_t>(rank)];
  // Every process asks its server for every reply, so that the servers see
  // the same calls; only the sender's process keeps it.
  sdk::AsyncReply reply{server_->version(), server_->reply(rank)};
  node.reply_bytes = sim::payload_bytes(reply.tensors);
  node.reply_time = sim::NetworkModel::transfer_time(node.reply_bytes, network_.link(rank));
  node.reply_arrival = from + node.reply_time;
  if (block_.contains(rank)) node.reply = std::move(reply);
  note_traffic(sim::CollectiveKind::ServerReply, node.reply_bytes, node.reply_time, meter);
}

void AsyncSchedule::note_traffic(sim::CollectiveKind kind, double bytes, double seconds,
                                 const std::function<sim::NodeMeter&(int)>& meter) const {
  for (int m = block_.first; m < block_.first + block_.count; ++m) meter(m).note_server_traffic(kind, bytes, seconds);
}

void AsyncSchedule::rejoin(int rank) {
  ScheduledNode& node = nodes_.at(static_cast<size_t>(rank));
  ++node.life;
  node.reply.reset();
  node.to_send.clear();
  node.sending = false;
  node.awaiting = true;
  node.pull = true;
}

}  // namespace exogym::runtime::async
