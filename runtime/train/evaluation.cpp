#include "exogym/runtime/train/evaluation.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "exogym/runtime/host/devices.h"
#include "exogym/runtime/manifest/manifest.h"
#include "exogym/runtime/sim/node_meter.h"
#include "exogym/runtime/train/autocast_scope.h"
#include "exogym/runtime/train/model_state.h"
#include "exogym/runtime/train/training_setup.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::train {

namespace {

double eval_metric_mean(double sum, int64_t count) { return count > 0 ? sum / static_cast<double>(count) : NAN; }

output::EvalValues evaluate_model(sdk::Model& model, const sdk::Dataset& data, const std::vector<int64_t>& indices,
                                  int64_t batch_size, const c10::Device& device,
                                  const std::vector<std::string>& metric_names, manifest::Precision precision) {
  at::NoGradGuard no_grad;
  AutocastScope autocast(precision, device.type());
  model.network().eval();
  double loss_sum = 0;
  std::vector<double> metric_sums(metric_names.size(), 0.0);
  const int64_t total = static_cast<int64_t>(indices.size());
  for (int64_t start = 0; start < total; start += batch_size) {
    const int64_t n = std::min(batch_size, total - start);
    std::vector<int64_t> chunk(indices.begin() + start, indices.begin() + start + n);
    sdk::EvalOutput out = model.evaluate(host::to_device(data.get(chunk), device));
    loss_sum += out.loss.item<double>() * static_cast<double>(n);
    for (size_t i = 0; i < metric_names.size(); ++i) {
      auto it = out.metrics.find(metric_names[i]);
      if (it == out.metrics.end()) {
        throw sdk::Error("model.evaluate() did not report metric \"" + metric_names[i] + "\" listed in metric_names()");
      }
      metric_sums[i] += it->second.item<double>() * static_cast<double>(n);
    }
  }
  model.network().train();
  output::EvalValues values;
  values.loss = eval_metric_mean(loss_sum, total);
  for (double sum : metric_sums) values.metrics.push_back(eval_metric_mean(sum, total));
  return values;
}

output::EvalValues evaluate_on_validation(const manifest::Manifest& m, const TrainingSetup& setup, int rank,
                                          sdk::Model& model) {
  return evaluate_model(model, *setup.data.val, setup.data.val_indices, m.eval_batch_size,
                        host::device_for_node(setup.devices, rank), setup.metric_names, m.precision);
}

// The global model: this replica with the averaged state in place of its own
// for the time of the evaluation.
output::EvalValues evaluate_averaged(const manifest::Manifest& m, const TrainingSetup& setup, int rank,
                                     sdk::Model& model, std::vector<at::Tensor>& state,
                                     const std::vector<at::Tensor>& averaged) {
  const std::vector<at::Tensor> saved = clones(state);
  overwrite(state, averaged);
  output::EvalValues values = evaluate_on_validation(m, setup, rank, model);
  overwrite(state, saved);
  return values;
}

// Loss and metrics side by side, so that one all-reduce of doubles carries
// the values of the two nodes that evaluate.
void pack(const output::EvalValues& v, std::vector<double>& packed, size_t offset) {
  packed[offset] = v.loss;
  std::copy(v.metrics.begin(), v.metrics.end(), packed.begin() + static_cast<std::ptrdiff_t>(offset) + 1);
}

output::EvalValues unpack(const std::vector<double>& packed, size_t offset, size_t metrics) {
  output::EvalValues v;
  v.loss = packed[offset];
  v.metrics.assign(packed.begin() + static_cast<std::ptrdiff_t>(offset) + 1,
                   packed.begin() + static_cast<std::ptrdiff_t>(offset + 1 + metrics));
  return v;
}

}  // namespace

std::optional<EvalRecord> evaluate(const manifest::Manifest& m, const TrainingSetup& setup,
                                   const std::vector<int>& live, const sim::NodeMeter& meter, int rank,
                                   sdk::Model& model, sdk::Communicator& comm, int64_t step) {
  // "Local" is the lowest live node's model (node 0's unless it is down);
  // the next live node evaluates the average, so that the two run at once.
  const int K = static_cast<int>(live.size());
  const int local_rank = live[0];
  const int global_rank = K > 1 ? live[1] : local_rank;
  const size_t M = setup.metric_names.size();
  FloatState state = float_state(model.network());
  const std::vector<at::Tensor> averaged = averaged_over_nodes(state.tensors, comm);

  // [local loss, local metrics, global loss, global metrics]
  std::vector<double> packed(2 * (1 + M), 0.0);
  if (rank == local_rank) pack(evaluate_on_validation(m, setup, rank, model), packed, 0);
  if (rank == global_rank) {
    // The average of one model is itself.
    pack(K == 1 ? unpack(packed, 0, M) : evaluate_averaged(m, setup, rank, model, state.tensors, averaged), packed,
         1 + M);
  }
  if (K > 1) {
    at::Tensor sums = at::tensor(packed, at::kDouble);
    comm.all_reduce(sums, sdk::ReduceOp::Sum);  // each value has exactly one contributor
    const double* p = sums.data_ptr<double>();
    packed.assign(p, p + packed.size());
  }
  if (rank != local_rank) return std::nullopt;
  EvalRecord r;
  r.step = step;
  r.local = unpack(packed, 0, M);
  r.global = unpack(packed, 1 + M, M);
  r.bytes_sent = meter.cluster_sent(sim::TrafficSource::Strategy) / m.nodes;
  r.sim_time_s = meter.clock();
  return r;
}

}  // namespace exogym::runtime::train
