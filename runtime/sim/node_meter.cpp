#include "exogym/runtime/sim/node_meter.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace exogym::runtime::sim {

NodeMeter::NodeMeter(int rank, const NetworkModel& network, const ComputeModel& compute, ClockExchange& clocks,
                     bool keep_rows)
    : rank_(rank), network_(network), compute_model_(compute), clocks_(clocks), keep_rows_(keep_rows) {}

void NodeMeter::begin_step(int64_t step, bool computes) {
  row_step_ = step + 1;
  in_step_ = true;
  idle_ = !computes;
  if (idle_) return;
  if (compute_model_.step_time) {
    pending_compute_ += *compute_model_.step_time / speed();
  } else {
    timing_ = true;
    timer_start_ = std::chrono::steady_clock::now();
  }
}

void NodeMeter::stop_timer() {
  if (!timing_) return;
  timing_ = false;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - timer_start_).count();
  pending_compute_ += elapsed / speed();
}

void NodeMeter::resume_compute(double share_seconds) {
  if (compute_model_.step_time || idle_) return;
  pending_compute_ += share_seconds / speed();
  restart_timer();
}

void NodeMeter::settle_compute() {
  clock_ += pending_compute_;
  compute_ += pending_compute_;
  pending_compute_ = 0;
}

void NodeMeter::end_step() {
  stop_timer();
  settle_compute();
  in_step_ = false;
  idle_ = false;
  in_flight_->check();
}

void NodeMeter::land_transfers() {
  // In the order they started: each ends no earlier than the one before.
  for (const Transfer& t : in_flight_->transfers()) {
    if (t.finish <= clock_) continue;
    const double busy = busy_between(clock_, t.finish);
    communication_ += busy;
    waiting_ += (t.finish - clock_) - busy;
    clock_ = t.finish;
  }
  in_flight_->clear();
}

void NodeMeter::restart_timer() {
  if (in_step_ && !idle_ && !compute_model_.step_time) {
    timing_ = true;
    timer_start_ = std::chrono::steady_clock::now();
  }
}

void NodeMeter::before_collective(TrafficSource source) {
  if (source != TrafficSource::Strategy) return;
  stop_timer();
  settle_compute();
  clocks_.post(rank_, sequence_, clock_);
}

void NodeMeter::count(TrafficSource source, CollectiveKind kind, Traffic mine, double cluster_sent,
                      double transfer_time) {
  const int i = index(source);
  traffic_[i].sent += mine.sent;
  traffic_[i].received += mine.received;
  cluster_sent_[i] += cluster_sent;
  ++calls_[i];
  if (keep_rows_) record_row(source, kind, cluster_sent, source == TrafficSource::Strategy ? transfer_time : 0.0);
  if (source == TrafficSource::Strategy) add_step_sent(mine.sent);
}

void NodeMeter::add_step_sent(double bytes) {
  if (row_step_ != step_sent_row_) {
    step_sent_row_ = row_step_;
    step_sent_ = 0;
  }
  step_sent_ += bytes;
  peak_step_sent_ = std::max(peak_step_sent_, step_sent_);
}

Transfer NodeMeter::schedule(CollectiveKind kind, double transfer_time) {
  // A failure noticed here: the survivors wait out the timeout first.
  const double start = clocks_.latest(sequence_) + failure_timeout_;
  Transfer t = schedule_from(kind, start, transfer_time);
  t.id = sequence_++;
  failure_timeout_ = 0;
  return t;
}

Transfer NodeMeter::schedule_from(CollectiveKind kind, double start, double transfer_time) {
  Transfer t;
  t.id = sequence_;
  t.kind = kind;
  t.step = in_step_ ? row_step_ - 1 : -1;
  t.start = start;
  t.begin = std::max(t.start, link_free_);
  t.seconds = transfer_time;
  t.finish = t.begin + transfer_time;
  link_free_ = t.finish;
  transfer_ += transfer_time;
  return t;
}

double NodeMeter::busy_between(double from, double to) const {
  double busy = 0;
  for (const Transfer& t : in_flight_->transfers()) busy += busy_within(t, from, to);
  return busy;
}

void NodeMeter::after_collective(TrafficSource source, CollectiveKind kind, Traffic mine, double cluster_sent,
                                 double transfer_time) {
  count(source, kind, mine, cluster_sent, transfer_time);
  if (source != TrafficSource::Strategy) return;
  take(schedule(kind, transfer_time));
}

void NodeMeter::before_group(TrafficSource source) {
  if (source != TrafficSource::Strategy) return;
  stop_timer();
  settle_compute();
  clocks_.post_group(rank_, clock_ + failure_timeout_);
  failure_timeout_ = 0;
}

void NodeMeter::after_group(TrafficSource source, CollectiveKind kind, Traffic mine, double cluster_sent,
                            double transfer_time) {
  count(source, kind, mine, cluster_sent, transfer_time);
  if (source != TrafficSource::Strategy) return;
  group_view_sent_ += cluster_sent;
  group_sent_ += mine.sent;
  take(schedule_from(kind, clocks_.group_latest(rank_), transfer_time));
}

void NodeMeter::take(const Transfer& t) {
  const double transfer_time = t.seconds;
  // Before it begins, the node waits for the others, or for its link to
  // finish the transfers in flight (communication). Nothing in flight: all
  // of [start, finish] is this transfer's, as before overlap existed.
  const double earlier = busy_between(clock_, t.begin);
  waiting_ += (t.begin - clock_) - earlier;
  communication_ += earlier + transfer_time;
  clock_ = t.finish;
  restart_timer();
}

uint64_t NodeMeter::start_transfer(CollectiveKind kind, Traffic mine, double cluster_sent, double transfer_time) {
  count(TrafficSource::Strategy, kind, mine, cluster_sent, transfer_time);
  const uint64_t ticket = in_flight_->add(schedule(kind, transfer_time));
  restart_timer();
  return ticket;
}

void NodeMeter::wait_transfer(uint64_t ticket) {
  stop_timer();
  settle_compute();
  const Transfer t = in_flight_->take(ticket);
  if (t.finish > clock_) {
    // Transfers started before it may still be running too; those started
    // after it begin when it ends.
    const double busy = busy_between(clock_, t.finish) + busy_within(t, clock_, t.finish);
    communication_ += busy;
    waiting_ += (t.finish - clock_) - busy;
    clock_ = t.finish;
  }
  restart_timer();
}

double NodeMeter::send_update(double bytes, double transfer_time) {
  stop_timer();
  settle_compute();
  traffic_[0].sent += bytes;
  ++calls_[0];
  add_step_sent(bytes);
  const Transfer t = schedule_from(CollectiveKind::ServerUpdate, clock_, transfer_time);
  awaiting_link_ = transfer_time;
  return t.finish;
}

void NodeMeter::take_reply(double bytes, double arrival, double transfer_time) {
  traffic_[0].received += bytes;
  transfer_ += transfer_time;
  const double idle = std::max(0.0, arrival - clock_);
  const double on_link = std::min(idle, awaiting_link_ + transfer_time);
  communication_ += on_link;
  waiting_ += idle - on_link;
  clock_ = std::max(clock_, arrival);
  link_free_ = std::max(link_free_, clock_);
  awaiting_link_ = 0;
}

void NodeMeter::note_server_traffic(CollectiveKind kind, double bytes, double transfer_time) {
  cluster_sent_[0] += bytes;
  if (keep_rows_) record_row(TrafficSource::Strategy, kind, bytes, transfer_time);
}

void NodeMeter::record_row(TrafficSource source, CollectiveKind kind, double cluster_sent, double transfer_time) {
  auto it = std::find_if(rows_.begin(), rows_.end(),
                         [&](const CommRow& r) { return r.step == row_step_ && r.source == source && r.kind == kind; });
  if (it == rows_.end()) {
    CommRow fresh;
    fresh.step = row_step_;
    fresh.source = source;
    fresh.kind = kind;
    it = rows_.insert(rows_.end(), fresh);
  }
  ++it->calls;
  it->bytes_sent += cluster_sent;
  it->time_s += transfer_time;
}

DonorView NodeMeter::donor_view() const {
  return {clock_, sequence_, {cluster_sent_[0], cluster_sent_[1]}, link_free_, group_view_sent_};
}

void NodeMeter::rejoin(const DonorView& donor, double transfer) {
  clock_ = donor.clock + transfer;
  sequence_ = donor.sequence;
  for (int i = 0; i < 2; ++i) cluster_sent_[i] = donor.cluster_sent[i];
  group_view_sent_ = donor.group_view_sent;
  pending_compute_ = 0;
  failure_timeout_ = 0;
  awaiting_link_ = 0;
  link_free_ = donor.link_free;
  // Its transfers were lost with its memory; load_recovery_state may take
  // the donor's back (resume_transfer).
  in_flight_->clear();
}

std::vector<CommRow> NodeMeter::take_rows() {
  std::vector<CommRow> rows;
  rows.swap(rows_);
  return rows;
}

nlohmann::json NodeMeter::state() const {
  auto pair = [](const double(&v)[2]) { return nlohmann::json::array({v[0], v[1]}); };
  const double sent[2] = {traffic_[0].sent, traffic_[1].sent};
  const double received[2] = {traffic_[0].received, traffic_[1].received};
  nlohmann::json state = {{"clock", clock_},
                          {"compute", compute_},
                          {"communication", communication_},
                          {"waiting", waiting_},
                          {"transfer", transfer_},
                          {"link_free", link_free_},
                          {"in_flight", in_flight_->state()},
                          {"sequence", sequence_},
                          {"sent", pair(sent)},
                          {"received", pair(received)},
                          {"cluster_sent", pair(cluster_sent_)},
                          {"calls", {calls_[0], calls_[1]}}};
  if (failure_timeout_ > 0) state["failure_timeout"] = failure_timeout_;
  if (peak_step_sent_ > 0) state["peak_step_sent"] = peak_step_sent_;
  if (group_view_sent_ > 0 || group_sent_ > 0) state["group_sent"] = {group_view_sent_, group_sent_};
  if (awaiting_link_ > 0) state["awaiting_link"] = awaiting_link_;
  return state;
}

void NodeMeter::check_state(const nlohmann::json& state) {
  if (!state.is_object()) throw std::invalid_argument("not an object");
  auto number = [&](const nlohmann::json& value, const std::string& field) {
    if (!value.is_number()) throw std::invalid_argument("\"" + field + "\" is not a number");
  };
  for (const char* key : {"clock", "compute", "communication", "waiting", "sequence"})
    number(state.contains(key) ? state.at(key) : nlohmann::json(), key);
  if (!state.at("sequence").is_number_unsigned())
    throw std::invalid_argument("\"sequence\" is not a count of collectives");
  for (const char* key : {"sent", "received", "cluster_sent", "calls"}) {
    const nlohmann::json& pair = state.contains(key) ? state.at(key) : nlohmann::json();
    if (!pair.is_array() || pair.size() != 2) throw std::invalid_argument("\"" + std::string(key) + "\" is not a pair");
    for (const auto& value : pair) number(value, key);
  }
  for (const char* key : {"failure_timeout", "peak_step_sent", "awaiting_link"})
    if (state.contains(key)) number(state.at(key), key);
  // Checkpoints from before non-blocking collectives have none of these.
  for (const char* key : {"transfer", "link_free"}) {
    if (state.contains(key)) number(state.at(key), key);
  }
  if (state.contains("in_flight")) TransfersInFlight::check_state(state.at("in_flight"));
  if (state.contains("group_sent")) {
    const nlohmann::json& pair = state.at("group_sent");
    if (!pair.is_array() || pair.size() != 2) throw std::invalid_argument("\"group_sent\" is not a pair");
    for (const auto& value : pair) number(value, "group_sent");
  }
}

void NodeMeter::restore(const nlohmann::json& state) {
  clock_ = state.at("clock");
  compute_ = state.at("compute");
  communication_ = state.at("communication");
  waiting_ = state.at("waiting");
  sequence_ = state.at("sequence");
  for (int i = 0; i < 2; ++i) {
    traffic_[i].sent = state.at("sent").at(i);
    traffic_[i].received = state.at("received").at(i);
    cluster_sent_[i] = state.at("cluster_sent").at(i);
    calls_[i] = state.at("calls").at(i);
  }
  failure_timeout_ = state.value("failure_timeout", 0.0);
  awaiting_link_ = state.value("awaiting_link", 0.0);
  // Absent from checkpoints written before it was counted: the peak of the
  // steps after the resume.
  peak_step_sent_ = state.value("peak_step_sent", 0.0);
  const nlohmann::json group = state.value("group_sent", nlohmann::json::array({0.0, 0.0}));
  group_view_sent_ = group.at(0);
  group_sent_ = group.at(1);
  step_sent_row_ = -1;
  step_sent_ = 0;
  transfer_ = state.value("transfer", communication_);
  link_free_ = state.value("link_free", 0.0);
  in_flight_->restore(state.value("in_flight", nlohmann::json::array()));
  pending_compute_ = 0;
  rows_.clear();
}

}  // namespace exogym::runtime::sim
