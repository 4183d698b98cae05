#include "exogym/runtime/sim/comm_meter.h"

#include <ATen/core/Tensor.h>

#include <algorithm>

namespace exogym::runtime::sim {

const char* to_string(TrafficSource source) { return source == TrafficSource::Strategy ? "strategy" : "runtime"; }

double payload_bytes(const std::vector<at::Tensor>& tensors) {
  double bytes = 0;
  for (const auto& t : tensors) {
    if (t.defined()) bytes += static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
  }
  return bytes;
}

ClockExchange::ClockExchange(int nodes) : nodes_(nodes), posted_(nodes, 0) {
  slots_[0].assign(nodes, 0.0);
  slots_[1].assign(nodes, 0.0);
}

void ClockExchange::post(int rank, uint64_t sequence, double arrival) {
  slots_[sequence % 2][rank] = arrival;
  posted_[rank] = sequence + 1;
}

double ClockExchange::latest(uint64_t sequence) const {
  const auto& slot = slots_[sequence % 2];
  double latest = *std::max_element(slot.begin(), slot.end());
  // Nodes of other processes never post here; their latest comes shared.
  if (shared_sequence_[sequence % 2] == sequence) latest = std::max(latest, shared_[sequence % 2]);
  return latest;
}

std::optional<ClockExchange::Local> ClockExchange::take_local(int first, int count) {
  if (count <= 0 || posted_[first] != taken_ + 1) return std::nullopt;
  const auto& slot = slots_[taken_ % 2];
  Local local{taken_, slot[first]};
  for (int r = first + 1; r < first + count; ++r) local.latest = std::max(local.latest, slot[r]);
  ++taken_;
  return local;
}

void ClockExchange::share_latest(uint64_t sequence, double latest) {
  shared_[sequence % 2] = latest;
  shared_sequence_[sequence % 2] = sequence;
}

NodeMeter::NodeMeter(int rank, const NetworkModel& network, const ComputeModel& compute, ClockExchange& clocks,
                     bool keep_rows)
    : rank_(rank),
      network_(network),
      compute_model_(compute),
      clocks_(clocks),
      speed_(static_cast<size_t>(rank) < compute.speed.size() ? compute.speed[rank] : 1.0),
      keep_rows_(keep_rows) {}

void NodeMeter::begin_step(int64_t step) {
  row_step_ = step + 1;
  in_step_ = true;
  if (compute_model_.step_time) {
    pending_compute_ += *compute_model_.step_time / speed_;
  } else {
    timing_ = true;
    timer_start_ = std::chrono::steady_clock::now();
  }
}

void NodeMeter::stop_timer() {
  if (!timing_) return;
  timing_ = false;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - timer_start_).count();
  pending_compute_ += elapsed / speed_;
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
}

void NodeMeter::before_collective(TrafficSource source) {
  if (source != TrafficSource::Strategy) return;
  stop_timer();
  settle_compute();
  clocks_.post(rank_, sequence_, clock_);
}

void NodeMeter::after_collective(TrafficSource source, CollectiveKind kind, Traffic mine, double cluster_sent,
                                 double transfer_time) {
  const int i = index(source);
  traffic_[i].sent += mine.sent;
  traffic_[i].received += mine.received;
  cluster_sent_[i] += cluster_sent;
  ++calls_[i];
  if (keep_rows_) record_row(source, kind, cluster_sent, source == TrafficSource::Strategy ? transfer_time : 0.0);
  if (source != TrafficSource::Strategy) return;

  const double start = clocks_.latest(sequence_++);
  waiting_ += start - clock_;
  communication_ += transfer_time;
  clock_ = start + transfer_time;
  if (in_step_ && !compute_model_.step_time) {
    timing_ = true;
    timer_start_ = std::chrono::steady_clock::now();
  }
}

void NodeMeter::record_row(TrafficSource source, CollectiveKind kind, double cluster_sent, double transfer_time) {
  auto it = std::find_if(rows_.begin(), rows_.end(), [&](const CommRow& r) {
    return r.step == row_step_ && r.source == source && r.kind == kind;
  });
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

std::vector<CommRow> NodeMeter::take_rows() {
  std::vector<CommRow> rows;
  rows.swap(rows_);
  return rows;
}

void MeteredCommunicator::all_reduce(std::vector<at::Tensor>& tensors, sdk::ReduceOp op) {
  const double bytes = payload_bytes(tensors);
  const int K = size();
  meter_.before_collective(source_);
  inner_.all_reduce(tensors, op);
  meter_.after_collective(source_, CollectiveKind::AllReduce, all_reduce_traffic(bytes, K),
                          all_reduce_total_sent(bytes, K), meter_.network().all_reduce_time(bytes));
}

void MeteredCommunicator::broadcast(std::vector<at::Tensor>& tensors, int root) {
  const double bytes = payload_bytes(tensors);
  const int K = size();
  meter_.before_collective(source_);
  inner_.broadcast(tensors, root);
  meter_.after_collective(source_, CollectiveKind::Broadcast, broadcast_traffic(bytes, K, rank(), root),
                          broadcast_total_sent(bytes, K), meter_.network().broadcast_time(bytes));
}

std::vector<std::vector<at::Tensor>> MeteredCommunicator::all_gather(const std::vector<at::Tensor>& tensors) {
  meter_.before_collective(source_);
  auto gathered = inner_.all_gather(tensors);
  // Ranks may send different amounts; the gathered tensors say how much.
  std::vector<double> by_rank;
  by_rank.reserve(gathered.size());
  for (const auto& from_rank : gathered) by_rank.push_back(payload_bytes(from_rank));
  // Node r sends every block but its successor's: the most is sent by the
  // node whose successor has the smallest block.
  double total = 0, smallest = by_rank.empty() ? 0.0 : by_rank[0];
  for (double b : by_rank) {
    total += b;
    smallest = std::min(smallest, b);
  }
  const double max_sent = total - smallest;
  meter_.after_collective(source_, CollectiveKind::AllGather, all_gather_traffic(by_rank, rank()),
                          all_gather_total_sent(by_rank), meter_.network().all_gather_time(max_sent));
  return gathered;
}

void MeteredCommunicator::barrier() {
  meter_.before_collective(source_);
  inner_.barrier();
  meter_.after_collective(source_, CollectiveKind::Barrier, Traffic{}, 0.0, meter_.network().barrier_time());
}

}  // namespace exogym::runtime::sim
