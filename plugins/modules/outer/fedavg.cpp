#include "exogym/modules/outer/fedavg.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/random.h"

namespace exogym::modules {

using sdk::OptionSpec;
using sdk::OptionType;

namespace {
// shared_generator stream of the island draws ("FEDAVG").
constexpr uint64_t kIslandStream = 0x464544415647ULL;
}  // namespace

sdk::ModuleSpecs FedAvgModule::specs() {
  return {"FedAvgModule",
          {
              OptionSpec{"H", OptionType::PositiveInteger, 1,
                         "average the parameters after every H local steps (after the H-th, 2H-th, ... step); "
                         "H = 1 with plain SGD is exactly all-reduce/DDP"},
              OptionSpec{"island_size", OptionType::PositiveInteger, nullptr,
                         "average within random islands of this many nodes, redrawn from the run's seed every "
                         "round (null: average over all nodes; at most nodes)"},
              OptionSpec{"aggregator", OptionType::String, "mean",
                         "how the parameters are combined: mean, or one that a few corrupted senders cannot drag "
                         "far: median (coordinate-wise), trimmed_mean (coordinate-wise, without the trim share at "
                         "each end) or krum (the node closest to its nearest others)",
                         aggregator_names()},
              OptionSpec{"trim", OptionType::NonNegativeNumber, nullptr,
                         "trimmed_mean: the share of nodes cut at each end of every coordinate, in [0, 0.5) (null: "
                         "0.1); only with that aggregator"},
              OptionSpec{"byzantine",
                         OptionType::NonNegativeInteger,
                         nullptr,
                         "krum: f, the corrupted senders it tolerates (null: 1); needs at least f + 3 nodes in every "
                         "average; only with that aggregator",
                         {},
                         false,
                         std::numeric_limits<int>::max()},
          }};
}

FedAvgModule::FedAvgModule(const sdk::ModuleOptions& o)
    : FedAvgModule(o.at("H").get<int64_t>(), o.at("island_size").is_null()
                                                 ? std::nullopt
                                                 : std::optional<int64_t>(o.at("island_size").get<int64_t>())) {
  aggregator_.kind = aggregator_from_name(o.at("aggregator").get<std::string>(), "aggregator");
  // An option of another aggregator than the one chosen would be ignored:
  // most likely the aggregator was meant to be that one.
  const std::pair<const char*, Aggregator> owners[] = {{"trim", Aggregator::TrimmedMean},
                                                       {"byzantine", Aggregator::Krum}};
  for (const auto& [option, owner] : owners) {
    if (!o.at(option).is_null() && aggregator_.kind != owner) {
      throw sdk::ConfigError(option, std::string("applies to the ") + to_string(owner) + " aggregator only, and " +
                                         "aggregator is " + to_string(aggregator_.kind) + ": set \"aggregator\": \"" +
                                         to_string(owner) + "\", or leave " + option + " out");
    }
  }
  if (!o.at("trim").is_null()) aggregator_.trim = o.at("trim").get<double>();
  if (!(aggregator_.trim < 0.5)) {
    throw sdk::ConfigError("trim", "expected a share in [0, 0.5), got " + sdk::json_excerpt(o.at("trim")));
  }
  if (!o.at("byzantine").is_null()) aggregator_.byzantine = o.at("byzantine").get<int64_t>();
}

FedAvgModule::FedAvgModule(int64_t H, std::optional<int64_t> island_size) : H_(H), island_size_(island_size) {}

std::vector<int64_t> FedAvgModule::average_sizes(int64_t live, std::optional<int64_t> island_size) {
  if (live < 2) return {};
  if (!island_size || *island_size >= live) return {live};
  std::vector<int64_t> sizes = {*island_size};
  if (live % *island_size >= 2) sizes.push_back(live % *island_size);  // an island of one keeps its parameters
  return sizes;
}

void FedAvgModule::check_nodes(const sdk::NodeContext& ctx) const {
  if (island_size_ && *island_size_ > ctx.num_nodes) {
    throw sdk::ConfigError("island_size", "islands of " + std::to_string(*island_size_) + " nodes, but the run has " +
                                              std::to_string(ctx.num_nodes) + " nodes; at most nodes (null: one " +
                                              "average over all of them)");
  }
  if (aggregator_.kind != Aggregator::Krum) return;
  const std::vector<int> counts = ctx.live_counts ? *ctx.live_counts : std::vector<int>{ctx.num_nodes};
  for (int live : counts) {
    for (int64_t size : average_sizes(live, island_size_)) {
      if (size >= aggregator_.byzantine + 3) continue;
      std::string why = live == ctx.num_nodes
                            ? "the run has " + std::to_string(live) + " nodes"
                            : "a step can have " + std::to_string(live) + " nodes live (of " +
                                  std::to_string(ctx.num_nodes) + ": participation or scheduled failures)";
      if (size != live) why += ", in islands of " + std::to_string(*island_size_) + " one of " + std::to_string(size);
      throw sdk::ConfigError("byzantine", "krum with f = " + std::to_string(aggregator_.byzantine) +
                                              " needs at least f + 3 = " + std::to_string(aggregator_.byzantine + 3) +
                                              " nodes in every average, but " + why);
    }
  }
}

void FedAvgModule::combine(sdk::Communicator& comm, const std::vector<int>* members, int64_t step) {
  if (aggregator_.kind == Aggregator::Mean) {
    std::vector<at::Tensor> list = params_;
    if (members) {
      comm.group_all_reduce(*members, list, sdk::ReduceOp::Avg);
    } else {
      comm.all_reduce(list, sdk::ReduceOp::Avg);
    }
    return;
  }
  // The robust aggregates need every member's parameters.
  // Membership decided as the run goes (churn on the clock, a trace) may
  // give krum fewer nodes than init() could know of: the option's fault.
  const int64_t size = members ? static_cast<int64_t>(members->size()) : ctx_->live_count();
  if (aggregator_.kind == Aggregator::Krum && size < aggregator_.byzantine + 3) {
    throw sdk::ConfigError("byzantine", "krum with f = " + std::to_string(aggregator_.byzantine) +
                                            " needs at least f + 3 = " + std::to_string(aggregator_.byzantine + 3) +
                                            " nodes in every average, but this one has " + std::to_string(size));
  }
  const auto gathered = members ? comm.group_all_gather(*members, params_) : comm.all_gather(params_);
  const SharedAggregates::Result result =
      aggregates_->get(step, members ? *members : std::vector<int>{}, [&] { return aggregate(gathered, aggregator_); });
  for (size_t i = 0; i < params_.size(); ++i) params_[i].copy_((*result)[i]);
}

void FedAvgModule::init(sdk::NodeContext& ctx, sdk::Model& model) {
  check_nodes(ctx);
  ctx_ = &ctx;
  for (auto& p : sdk::trainable_parameters(model)) params_.push_back(p.detach());
  if (aggregator_.kind != Aggregator::Mean) aggregates_ = SharedAggregates::in_process(ctx);
}

std::vector<std::vector<int>> FedAvgModule::islands(uint64_t run_seed, int64_t round, int num_nodes,
                                                    int64_t island_size) {
  at::Tensor order =
      at::randperm(num_nodes, sdk::shared_generator(run_seed, kIslandStream, static_cast<uint64_t>(round)),
                   at::TensorOptions().dtype(at::kLong));
  auto ranks = order.accessor<int64_t, 1>();
  std::vector<std::vector<int>> out;
  for (int start = 0; start < num_nodes; start += static_cast<int>(island_size)) {
    const int end = static_cast<int>(std::min<int64_t>(num_nodes, start + island_size));
    std::vector<int> island;
    for (int j = start; j < end; ++j) island.push_back(static_cast<int>(ranks[j]));
    out.push_back(std::move(island));
  }
  return out;
}

void FedAvgModule::communicate(sdk::NodeContext& ctx, sdk::Model& /*model*/, int64_t step) {
  // Sync after every H local steps: steps H-1, 2H-1, ... (0-based). The
  // reference synced when t % H == 0 && t > 0, which made the first round
  // H+1 steps long and H = 1 skip the first step; with this rule FedAvg with
  // H = 1 and plain SGD is exactly DDP.
  if ((step + 1) % H_ != 0) return;
  // Over the live nodes (all of them unless the run simulates failures).
  const std::vector<int> live = ctx.live_ranks();
  const int K = static_cast<int>(live.size());
  if (K == 1) return;
  at::NoGradGuard no_grad;
  auto& comm = ctx.communicator();

  if (!island_size_ || *island_size_ >= K) {
    ctx.record("island_size", K);
    combine(comm, nullptr, step);
    return;
  }

  // Islands, drawn among the live nodes: each averages within itself
  // (group_all_reduce, rank order), so only its members send, and only
  // their parameters. The reference's all_gather over everyone gave the
  // same averages, at K / island_size times the bytes.
  const int64_t round = (step + 1) / H_ - 1;
  std::vector<int> members;  // ranks
  for (auto& island : islands(ctx.seed, round, K, *island_size_)) {
    for (int position : island) {
      if (live[position] == ctx.rank) {
        for (int p : island) members.push_back(live[p]);
      }
    }
  }
  std::sort(members.begin(), members.end());
  // The last island is smaller when island_size does not divide the nodes.
  ctx.record("island_size", static_cast<double>(members.size()));
  if (members.size() < 2) return;  // an island of one keeps its parameters
  combine(comm, &members, step);
}

}  // namespace exogym::modules
