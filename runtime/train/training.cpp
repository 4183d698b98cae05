#include "exogym/runtime/train/training.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/version.h>

#include <chrono>
#include <cmath>
#include <mutex>

#include "exogym/runtime/cluster/cluster.h"
#include "exogym/runtime/sim/comm_meter.h"
#include "exogym/runtime/data/registry.h"
#include "exogym/runtime/data/sampler.h"
#include "exogym/runtime/cluster/devices.h"
#include "exogym/runtime/cluster/interrupt.h"
#include "exogym/runtime/cluster/malloc_tuning.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/cluster/work_crew.h"
#include "exogym/runtime/dist/world.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/node.h"
#include "exogym/sdk/strategy.h"

namespace exogym::runtime::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Seeds that differ per node and purpose but follow from the run's seed.
uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  uint64_t x = seed ^ (0x9E3779B97F4A7C15ULL * (a + 1)) ^ (0xC2B2AE3D27D4EB4FULL * (b + 1));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 29;
  return x;
}

struct NamedTensors {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
};

// Parameters, then floating-point buffers (e.g. BatchNorm statistics): the
// state that training changes and that averaging makes sense for.
NamedTensors float_state(torch::nn::Module& module) {
  NamedTensors out;
  for (auto& item : module.named_parameters(/*recurse=*/true)) {
    out.names.push_back(item.key());
    out.tensors.push_back(item.value());
  }
  for (auto& item : module.named_buffers(/*recurse=*/true)) {
    if (!at::isFloatingType(item.value().scalar_type())) continue;
    out.names.push_back(item.key());
    out.tensors.push_back(item.value());
  }
  return out;
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(t.detach().clone());
  return out;
}

sdk::Batch to_device(sdk::Batch batch, const c10::Device& device) {
  if (device.is_cpu()) return batch;
  for (auto& [name, tensor] : batch) tensor = tensor.to(device, /*non_blocking=*/true);
  return batch;
}

std::shared_ptr<const sdk::Dataset> make_dataset(const manifest::DataSpec& spec, plugin::PluginLoader& loader, const manifest::Manifest& m,
                                                 json& resolved_options, const RunOptions& options,
                                                 const dist::NodeBlock& block) {
  sdk::DatasetRequest request;
  request.path = spec.path;
  request.split = spec.split;
  request.seed = m.seed;
  request.first_node = block.first;
  request.local_nodes = block.count;
  request.num_nodes = m.nodes;
  const std::string options_path = spec.json_path + ".options";
  try {
    std::shared_ptr<plugin::LoadedPlugin> plugin;
    if (auto specs = data::builtin_dataset_options(spec.dataset)) {
      resolved_options = sdk::validate_options(spec.options, *specs, options_path);
    } else {
      plugin = loader.load("dataset", spec.dataset, spec.json_path + ".dataset", m.base_dir);
      resolved_options = plugin->validate(spec.options, options_path);
    }
    const std::string key = spec.dataset + "|" + spec.path.string() + "|" + spec.split + "|" + resolved_options.dump() +
                            "|" + std::to_string(m.seed) + "|" + std::to_string(m.nodes) + "|" +
                            std::to_string(block.first) + "+" + std::to_string(block.count);
    if (options.dataset_cache) {
      if (auto it = options.dataset_cache->find(key); it != options.dataset_cache->end()) return it->second;
    }
    std::shared_ptr<const sdk::Dataset> dataset =
        plugin ? plugin->create_dataset(resolved_options, request)
               : data::make_builtin_dataset(spec.dataset, resolved_options, request);
    if (options.dataset_cache) (*options.dataset_cache)[key] = dataset;
    return dataset;
  } catch (const sdk::DataError& e) {
    throw sdk::ConfigError(spec.json_path + ".path", e.what());
  } catch (const sdk::ConfigError& e) {
    // A dataset's own errors: an empty path is its split, else an option.
    if (e.path().rfind(spec.json_path, 0) == 0) throw;
    throw sdk::ConfigError(spec.json_path + (e.path().empty() ? ".split" : ".options." + e.path()), e.message());
  }
}

double eval_metric_mean(double sum, int64_t count) { return count > 0 ? sum / static_cast<double>(count) : NAN; }

output::EvalValues evaluate_model(sdk::Model& model, const sdk::Dataset& data, const std::vector<int64_t>& indices,
                          int64_t batch_size, const c10::Device& device, const std::vector<std::string>& metric_names) {
  at::NoGradGuard no_grad;
  model.module().eval();
  double loss_sum = 0;
  std::vector<double> metric_sums(metric_names.size(), 0.0);
  const int64_t total = static_cast<int64_t>(indices.size());
  for (int64_t start = 0; start < total; start += batch_size) {
    const int64_t n = std::min(batch_size, total - start);
    std::vector<int64_t> chunk(indices.begin() + start, indices.begin() + start + n);
    sdk::EvalOutput out = model.evaluate(to_device(data.get(chunk), device));
    loss_sum += out.loss.item<double>() * static_cast<double>(n);
    for (size_t i = 0; i < metric_names.size(); ++i) {
      auto it = out.metrics.find(metric_names[i]);
      if (it == out.metrics.end()) {
        throw sdk::Error("model.evaluate() did not report metric \"" + metric_names[i] + "\" listed in metric_names()");
      }
      metric_sums[i] += it->second.item<double>() * static_cast<double>(n);
    }
  }
  model.module().train();
  output::EvalValues values;
  values.loss = eval_metric_mean(loss_sum, total);
  for (double s : metric_sums) values.metrics.push_back(eval_metric_mean(s, total));
  return values;
}

output::Progress::Metrics named_metrics(const std::vector<std::string>& names, const output::EvalValues& v) {
  output::Progress::Metrics metrics;
  for (size_t i = 0; i < names.size(); ++i) metrics.emplace_back(names[i], v.metrics[i]);
  return metrics;
}

json eval_json(const EvalRecord& r, const std::vector<std::string>& names) {
  json j = {{"step", r.step},
            {"local_loss", r.local.loss},
            {"global_loss", r.global.loss},
            {"local_perplexity", std::exp(r.local.loss)},
            {"global_perplexity", std::exp(r.global.loss)},
            {"bytes_sent", r.bytes_sent},
            {"sim_time_s", r.sim_time_s}};
  for (size_t i = 0; i < names.size(); ++i) {
    j["local_" + names[i]] = r.local.metrics[i];
    j["global_" + names[i]] = r.global.metrics[i];
  }
  return j;
}

// A metric sink for processes other than process 0: rows wait here until the
// run ends and process 0 appends them to metrics.csv.
class MetricBuffer final : public sdk::MetricSink {
 public:
  void record(int node, int64_t step, const std::string& name, double value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    rows_.push_back({node, step, name, value});
  }
  json rows() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return rows_;
  }

 private:
  mutable std::mutex mutex_;
  json rows_ = json::array();
};

// The run's shared, read-only state plus node 0's reporting. Per-node
// vectors are indexed by global rank; in a run over several processes only
// this process's block is filled.
struct RunState {
  const manifest::Manifest& m;
  std::vector<c10::Device> devices;
  std::shared_ptr<plugin::LoadedPlugin> model_plugin, strategy_plugin;
  json model_options, strategy_options;
  std::shared_ptr<const sdk::Dataset> train_data, val_data;
  std::unique_ptr<data::Sampler> sampler;
  std::vector<int64_t> val_indices;
  std::vector<std::shared_ptr<sdk::Model>> models;
  std::vector<std::shared_ptr<sdk::Strategy>> strategies;
  std::vector<std::string> metric_names;
  int64_t accumulation = 1;
  int threads = 1;
  std::unique_ptr<output::RunWriter> writer;  // process 0 only
  // Other processes keep their nodes' metrics for process 0 (metrics.csv).
  std::unique_ptr<MetricBuffer> metric_buffer;
  std::unique_ptr<output::Progress> progress;
  std::shared_ptr<spdlog::logger> log;
  // The simulated network and clocks (comm_meter.h).
  std::unique_ptr<sim::NetworkModel> network;
  sim::ComputeModel compute;
  std::unique_ptr<sim::ClockExchange> clocks;
  std::vector<std::unique_ptr<sim::NodeMeter>> meters;
  std::chrono::steady_clock::time_point started;
  // The training loop runs from the first node's first step to the last
  // node's last: with fewer compute slots than nodes, node 0 may wait behind
  // others, so its own times would hide part of the work.
  std::mutex loop_mutex;
  std::chrono::steady_clock::time_point loop_started, loop_finished;
  void note_loop_start() {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(loop_mutex);
    if (loop_started == std::chrono::steady_clock::time_point{} || now < loop_started) loop_started = now;
  }
  void note_loop_end() {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(loop_mutex);
    loop_finished = std::max(loop_finished, now);
  }
  // Written by node 0 only.
  std::optional<EvalRecord> last_eval;
  std::optional<TargetHit> target_hit;
  double last_train_loss = NAN;
};

bool eval_enabled(const manifest::Manifest& m) { return m.val_data.has_value() && m.eval_size > 0; }

// Evaluation is a collective: every node averages its parameters into the
// global model; node 0 evaluates its own model (local) and node 1 the
// averaged one (global), on the same validation examples.
void evaluate_step(RunState& s, int rank, sdk::Model& model, sdk::Communicator& comm, int64_t step) {
  const sim::NodeMeter& meter = *s.meters[rank];
  const int K = s.m.nodes;
  const int global_rank = K > 1 ? 1 : 0;
  const size_t M = s.metric_names.size();
  auto state = float_state(model.module());
  std::vector<at::Tensor> averaged = clones(state.tensors);
  comm.all_reduce(averaged, sdk::ReduceOp::Avg);

  const c10::Device device = cluster::device_for_node(s.devices, rank);
  std::vector<double> result(2 * (1 + M), 0.0);
  auto store = [&](size_t offset, const output::EvalValues& v) {
    result[offset] = v.loss;
    for (size_t i = 0; i < M; ++i) result[offset + 1 + i] = v.metrics[i];
  };
  if (rank == 0)
    store(0, evaluate_model(model, *s.val_data, s.val_indices, s.m.eval_batch_size, device, s.metric_names));
  if (rank == global_rank) {
    if (K == 1) {
      for (size_t i = 0; i <= M; ++i) result[1 + M + i] = result[i];  // the average of one model is itself
    } else {
      std::vector<at::Tensor> saved = clones(state.tensors);
      {
        at::NoGradGuard no_grad;
        for (size_t i = 0; i < state.tensors.size(); ++i) state.tensors[i].detach().copy_(averaged[i]);
      }
      store(1 + M, evaluate_model(model, *s.val_data, s.val_indices, s.m.eval_batch_size, device, s.metric_names));
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < state.tensors.size(); ++i) state.tensors[i].detach().copy_(saved[i]);
    }
  }
  if (K > 1) {
    at::Tensor packed = at::tensor(result, at::kDouble);
    comm.all_reduce(packed, sdk::ReduceOp::Sum);  // each slot has exactly one contributor
    auto* p = packed.data_ptr<double>();
    result.assign(p, p + result.size());
  }
  if (rank == 0) {
    EvalRecord record;
    record.step = step;
    record.local.loss = result[0];
    record.global.loss = result[1 + M];
    for (size_t i = 0; i < M; ++i) {
      record.local.metrics.push_back(result[1 + i]);
      record.global.metrics.push_back(result[2 + M + i]);
    }
    record.bytes_sent = meter.cluster_sent(sim::TrafficSource::Strategy) / K;
    record.sim_time_s = meter.clock();
    s.writer->validation_row(step, record.local, record.global, record.bytes_sent, record.sim_time_s);
    if (s.m.target_loss && !s.target_hit && record.global.loss <= *s.m.target_loss) {
      s.target_hit = TargetHit{step, record.sim_time_s, record.bytes_sent,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count()};
    }
    s.progress->validation(step, record.local.loss, record.global.loss, named_metrics(s.metric_names, record.global));
    s.last_eval = record;
  }
}

void node_main(RunState& s, cluster::Cluster& cluster, int rank, cluster::NodeSlot& slot) {
  // OpenMP settings are per thread: a new thread would start with one
  // OpenMP thread per core, and K such teams oversubscribe the machine.
  at::set_num_threads(s.threads);
  const manifest::Manifest& m = s.m;
  sdk::Model& model = *s.models[rank];
  sdk::Strategy& strategy = *s.strategies[rank];
  auto backend = cluster.communicator(rank, &slot);
  sim::NodeMeter& meter = *s.meters[rank];
  // What the strategy sends is metered as traffic a real cluster would carry;
  // the runtime's own collectives are counted apart and cost no simulated time.
  sim::MeteredCommunicator strategy_comm(*backend, meter, sim::TrafficSource::Strategy);
  sim::MeteredCommunicator runtime_comm(*backend, meter, sim::TrafficSource::Runtime);
  const c10::Device device = cluster::device_for_node(s.devices, rank);

  sdk::NodeContext ctx;
  ctx.rank = rank;
  ctx.num_nodes = m.nodes;
  ctx.device = device;
  ctx.comm = &strategy_comm;
  ctx.step = 0;
  ctx.max_steps = m.max_steps;
  ctx.seed = m.seed;
  ctx.log = s.log;
  ctx.metrics = s.writer ? static_cast<sdk::MetricSink*>(s.writer.get()) : s.metric_buffer.get();

  std::string phase = "initial broadcast";
  const std::string strategy_name =
      "strategy \"" + m.strategy.plugin + "\" (" + s.strategy_plugin->description().file.string() + ")";
  const std::string model_name =
      "model \"" + m.model.plugin + "\" (" + s.model_plugin->description().file.string() + ")";
  try {
    slot.acquire();
    {
      // Every node starts from node 0's parameters and buffers.
      at::NoGradGuard no_grad;
      std::vector<at::Tensor> state;
      for (auto& p : model.module().parameters()) state.push_back(p.detach());
      for (auto& b : model.module().buffers()) state.push_back(b.detach());
      runtime_comm.broadcast(state, 0);
    }
    phase = "init of " + strategy_name;
    strategy.init(ctx, model);

    const int64_t B = m.batch_size, b = m.minibatch_size, K = m.nodes;
    s.note_loop_start();
    for (int64_t t = 0; t < m.max_steps; ++t) {
      ctx.step = t;
      // Every node checks, so the first to see the request stops the others
      // at their next collective.
      if (cluster::interrupt_requested()) throw cluster::Interrupted("interrupted by a signal (Ctrl-C) after " + std::to_string(t) + " steps");
      meter.set_completed_steps(t);
      if (eval_enabled(m) && m.eval_interval > 0 && t % m.eval_interval == 0) {
        phase = "evaluation";
        evaluate_step(s, rank, model, runtime_comm, t);
      }
      meter.begin_step(t);
      phase = "zero_grad of " + strategy_name;
      strategy.zero_grad();
      phase = "loading the training batch";
      const std::vector<int64_t> indices = s.sampler->batch_indices(rank, t);
      double loss_sum = 0;
      for (int64_t j = 0; j < s.accumulation; ++j) {
        std::vector<int64_t> micro(indices.begin() + j * b, indices.begin() + (j + 1) * b);
        phase = "loading the training batch";
        sdk::Batch batch = to_device(s.train_data->get(micro), device);
        phase = "forward/backward of " + model_name;
        at::Tensor loss = model.loss(batch);
        if (loss.numel() != 1)
          throw sdk::Error("loss() must return a scalar, got shape " + std::to_string(loss.dim()) + "-D");
        loss.backward();
        loss_sum += loss.item<double>();
      }
      if (s.accumulation > 1) {
        // Per-node gradient = mean of the micro-batch mean gradients.
        at::NoGradGuard no_grad;
        for (auto& p : model.module().parameters()) {
          if (p.grad().defined()) p.mutable_grad().div_(static_cast<double>(s.accumulation));
        }
      }
      phase = "step of " + strategy_name;
      strategy.step();
      meter.end_step();
      if (rank == 0) {
        const double loss = loss_sum / static_cast<double>(s.accumulation);
        if (!std::isfinite(loss) && std::isfinite(s.last_train_loss)) {
          s.log->warn("node 0: training loss became {} at step {}", loss, t);
        }
        s.last_train_loss = loss;
        s.writer->train_row(t + 1, (t + 1) * B * K, loss, strategy.lr(),
                            meter.cluster_sent(sim::TrafficSource::Strategy) / static_cast<double>(K), meter.clock());
        s.writer->comm_rows(meter.take_rows());
        s.progress->step(t + 1, loss, strategy.lr());
      }
    }
    s.note_loop_end();
    ctx.step = m.max_steps;
    meter.set_completed_steps(m.max_steps);
    if (eval_enabled(m)) {
      phase = "final evaluation";
      evaluate_step(s, rank, model, runtime_comm, m.max_steps);
    }
    phase = "averaging the final model";
    auto state = float_state(model.module());
    std::vector<at::Tensor> averaged = clones(state.tensors);
    runtime_comm.all_reduce(averaged, sdk::ReduceOp::Avg);
    if (rank == 0) s.writer->comm_rows(meter.take_rows());
    if (rank == 0 && m.save_model) {
      phase = "saving model.pt";
      std::vector<std::pair<std::string, at::Tensor>> named;
      for (size_t i = 0; i < averaged.size(); ++i) named.emplace_back(state.names[i], averaged[i]);
      // Integer buffers (e.g. BatchNorm's num_batches_tracked) are node 0's.
      for (auto& item : model.module().named_buffers(true)) {
        if (!at::isFloatingType(item.value().scalar_type())) named.emplace_back(item.key(), item.value());
      }
      s.writer->save_model(named);
    }
  } catch (const sdk::AbortedError&) {
    throw;
  } catch (const cluster::Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    throw sdk::Error("node " + std::to_string(rank) + ", step " + std::to_string(ctx.step) + ", " + phase + ": " +
                     e.what());
  }
}

// A run over P processes needs at least one node per process.
void check_processes(const manifest::Manifest& m, int processes) {
  if (m.nodes < processes) {
    throw sdk::ConfigError("nodes", "the run has " + std::to_string(m.nodes) + " node" + (m.nodes == 1 ? "" : "s") +
                                        " but " + std::to_string(processes) +
                                        " processes (--nproc or WORLD_SIZE): every process needs at least one node");
  }
}

// Each node's counters and clock split, for summary.json.
json node_stats(const sim::NodeMeter& meter) {
  const sim::Traffic& mine = meter.traffic(sim::TrafficSource::Strategy);
  return {{"node", meter.rank()},
          {"bytes_sent", mine.sent},
          {"bytes_received", mine.received},
          {"runtime_bytes_sent", meter.traffic(sim::TrafficSource::Runtime).sent},
          {"time_s", meter.clock()},
          {"compute_s", meter.compute_seconds()},
          {"communication_s", meter.communication_seconds()},
          {"waiting_s", meter.waiting_seconds()}};
}

// Builds this process's replicas and strategies. Only node 0's initial
// weights matter (every node starts from them through the initial
// broadcast), so the first replica is built alone from the run's seed and
// the rest in parallel. (Their random fills still take turns: LibTorch's
// global generator is locked while it fills a tensor.) The generator sees
// the same number of draws either way, so whatever uses it later does not
// depend on thread timing.
void build_replicas(RunState& s, const dist::NodeBlock& block, int cores) {
  const manifest::Manifest& m = s.m;
  s.models.resize(m.nodes);
  s.strategies.resize(m.nodes);
  auto build = [&](int rank) {
    std::shared_ptr<sdk::Model> model;
    try {
      model = s.model_plugin->create_model(s.model_options);
    } catch (const sdk::ConfigError& e) {
      throw sdk::ConfigError(m.model.path + ".options" + (e.path().empty() ? "" : "." + e.path()), e.message());
    }
    // Only node 0's draws survive the initial broadcast (sdk::Model).
    if (rank == 0) model->init_parameters();
    model->set_generator(at::detail::createCPUGenerator(mix_seed(m.seed, 1, rank)));
    model->module().to(cluster::device_for_node(s.devices, rank));
    model->module().train();
    s.models[rank] = std::move(model);
    try {
      s.strategies[rank] = s.strategy_plugin->create_strategy(s.strategy_options);
    } catch (const sdk::ConfigError& e) {
      throw sdk::ConfigError(m.strategy.path + ".options" + (e.path().empty() ? "" : "." + e.path()), e.message());
    }
  };
  at::manual_seed(m.seed);
  // One intra-op thread here: an OpenMP team made on this thread would stay
  // alive through the run, and with more OpenMP threads than cores libgomp
  // stops spinning between parallel regions, so every node's team would
  // sleep and wake (measured: nanoGPT at K = 1, 23 000 context switches
  // instead of 230, and 10-15 % slower).
  at::set_num_threads(1);
  build(block.first);
  const int rest = block.count - 1;
  cluster::WorkCrew crew(std::min(rest, std::max(1, cores)) - 1);
  crew.run(rest, [&](int64_t i) { build(block.first + 1 + static_cast<int>(i)); });
}

}  // namespace

void check_run(const manifest::Manifest& m, plugin::PluginLoader& loader, int processes) {
  check_processes(m, processes);
  cluster::resolve_devices(m.device);
  loader.load("model", m.model.plugin, m.model.path + ".plugin", m.base_dir)
      ->validate(m.model.options, m.model.path + ".options");
  loader.load("strategy", m.strategy.plugin, m.strategy.path + ".plugin", m.base_dir)
      ->validate(m.strategy.options, m.strategy.path + ".options");
}

RunResult train_run(const manifest::Manifest& m, plugin::PluginLoader& loader, const RunOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  RunState s{m};
  s.started = started;
  // Over several processes, this one runs a block of the nodes and process
  // 0 (which hosts node 0) writes the run folder.
  dist::ProcessMesh* mesh = options.mesh;
  const int processes = mesh ? mesh->size() : 1;
  check_processes(m, processes);
  const dist::NodeBlock block = dist::node_block(m.nodes, processes, mesh ? mesh->rank() : 0);
  const bool writes = !mesh || mesh->rank() == 0;
  const std::string label = m.variant.empty() ? m.name : m.name + "/" + m.variant;
  s.log = spdlog::get("exogym");
  if (!s.log) s.log = spdlog::stderr_color_mt("exogym");

  // Everything that can be wrong with the manifest is found before training.
  s.devices = cluster::resolve_devices(m.device);
  s.model_plugin = loader.load("model", m.model.plugin, m.model.path + ".plugin", m.base_dir);
  s.model_options = s.model_plugin->validate(m.model.options, m.model.path + ".options");
  s.strategy_plugin = loader.load("strategy", m.strategy.plugin, m.strategy.path + ".plugin", m.base_dir);
  s.strategy_options = s.strategy_plugin->validate(m.strategy.options, m.strategy.path + ".options");

  json train_data_options, val_data_options;
  const auto data_started = std::chrono::steady_clock::now();
  s.train_data = make_dataset(m.train_data, loader, m, train_data_options, options, block);
  s.sampler = data::make_sampler(m.train_data.partition, s.train_data->size(), m.nodes, m.batch_size, m.seed);
  if (eval_enabled(m)) {
    s.val_data = make_dataset(*m.val_data, loader, m, val_data_options, options, block);
    s.val_indices = data::validation_indices(s.val_data->size(), m.eval_size);
  }
  const double dataset_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - data_started).count();
  s.accumulation = m.batch_size / m.minibatch_size;

  const int cores = options.cores > 0 ? options.cores : cluster::available_cores();
  if (!cluster::tune_malloc_for_training(cores)) s.log->debug("malloc settings left as they are");
  const int parallelism = m.parallelism > 0 ? m.parallelism : std::max(1, std::min(block.count, cores));
  s.threads = m.threads > 0 ? m.threads : std::max(1, cores / parallelism);
  // Each compute slot runs on its own cores (see ComputeSlots). Processes
  // that share a host split its cores and are left to the kernel.
  const bool pinned = m.pin_threads && cores == cluster::available_cores() && parallelism <= cores;
  if (parallelism * s.threads > cores) {
    s.log->warn("parallelism {} × threads {} exceeds the {} cores: OpenMP teams will contend and slow the run down",
                parallelism, s.threads, cores);
  }

  build_replicas(s, block, cores);
  sdk::Model& first_model = *s.models[block.first];
  s.metric_names = first_model.metric_names();
  int64_t parameters = 0;
  for (const auto& p : first_model.module().parameters()) parameters += p.numel();

  fs::path run_dir;
  if (writes) {
    run_dir = options.run_dir.empty() ? output::unique_folder(m.run_dir()) : options.run_dir;
    s.writer = std::make_unique<output::RunWriter>(run_dir, s.metric_names);
  } else {
    s.metric_buffer = std::make_unique<MetricBuffer>();
  }
  json config = m.resolved;
  config["model"]["options"] = s.model_options;
  config["strategy"]["options"] = s.strategy_options;
  config["data"]["train"]["options"] = train_data_options;
  if (eval_enabled(m)) config["data"]["val"]["options"] = val_data_options;
  config["runtime"] = {{"parallelism", parallelism},
                       {"threads_per_node", s.threads},
                       {"pinned", pinned},
                       {"cores", cores},
                       {"libtorch", TORCH_VERSION},
                       {"run_dir", run_dir.string()}};
  if (mesh) {
    // parallelism, threads and cores above are process 0's.
    config["runtime"]["processes"] = processes;
    config["runtime"]["reduce"] = options.partial_reduce ? "partial" : "exact";
  }
  if (writes) s.writer->write_config(config);
  s.progress = std::make_unique<output::Progress>(label, m.max_steps, writes ? options.progress : output::Progress::Mode::Quiet);
  if (writes) {
    s.log->info("{}: {} nodes of {} ({} parameters) with strategy {}, {} steps{}; writing {}", label, m.nodes,
                m.model.plugin, parameters, m.strategy.plugin, m.max_steps,
                mesh ? " over " + std::to_string(processes) + " processes" : std::string(), run_dir.string());
  }

  s.network = std::make_unique<sim::NetworkModel>(m.nodes, m.network.link, m.network.per_node);
  s.compute.step_time = m.compute.step_time;
  s.compute.speed.assign(m.nodes, 1.0);
  for (const auto& [rank, speed] : m.compute.speed) s.compute.speed[rank] = speed;
  s.clocks = std::make_unique<sim::ClockExchange>(m.nodes);
  s.meters.resize(m.nodes);
  for (int rank = block.first; rank < block.first + block.count; ++rank)
    s.meters[rank] = std::make_unique<sim::NodeMeter>(rank, *s.network, s.compute, *s.clocks, /*keep_rows=*/rank == 0);

  {
    auto cluster =
        mesh ? std::make_unique<cluster::Cluster>(m.nodes, parallelism, *mesh, block, s.clocks.get(), !options.partial_reduce)
             : std::make_unique<cluster::Cluster>(m.nodes, parallelism);
    if (pinned) cluster->slots().pin_threads();
    cluster->run([&](int rank, cluster::NodeSlot& slot) { node_main(s, *cluster, rank, slot); });
  }
  s.progress->finish();

  // Every node's account, and the metrics other processes kept, go to the
  // process that writes the run folder.
  json per_node = json::array();
  json remote_metrics = json::array();
  {
    json mine = json::array();
    for (int rank = block.first; rank < block.first + block.count; ++rank) mine.push_back(node_stats(*s.meters[rank]));
    if (mesh) {
      const json local = {{"nodes", mine}, {"metrics", s.metric_buffer ? s.metric_buffer->rows() : json::array()}};
      for (const auto& text : mesh->all_gather_text(local.dump())) {
        const json part = json::parse(text);
        for (const auto& n : part.at("nodes")) per_node.push_back(n);
        for (const auto& row : part.at("metrics")) remote_metrics.push_back(row);
      }
    } else {
      per_node = mine;
    }
  }

  RunResult r;
  r.name = m.name;
  r.variant = m.variant;
  r.run_dir = run_dir;
  r.model_plugin = m.model.plugin;
  r.strategy_plugin = m.strategy.plugin;
  r.metric_names = s.metric_names;
  r.nodes = m.nodes;
  r.steps = m.max_steps;
  r.examples_trained = m.max_steps * m.batch_size * m.nodes;
  r.parameters = parameters;
  r.last_train_loss = s.last_train_loss;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  r.dataset_seconds = dataset_seconds;
  if (s.loop_started != std::chrono::steady_clock::time_point{}) {  // this process's nodes
    r.startup_seconds = std::chrono::duration<double>(s.loop_started - started).count();
    r.loop_seconds = std::chrono::duration<double>(s.loop_finished - s.loop_started).count();
  }
  r.final_eval = s.last_eval;
  r.target_loss = m.target_loss;
  r.target_hit = s.target_hit;

  if (!writes) {
    s.strategies.clear();
    s.models.clear();
    return r;
  }
  for (const auto& row : remote_metrics) {
    s.writer->record(row.at(0).get<int>(), row.at(1).get<int64_t>(), row.at(2).get<std::string>(),
                     row.at(3).get<double>());
  }

  // The simulated cluster's account.
  SimulationSummary& sim = r.simulated;
  for (const auto& node : per_node) {
    sim.time_s = std::max(sim.time_s, node.at("time_s").get<double>());
    sim.compute_s += node.at("compute_s").get<double>() / m.nodes;
    sim.communication_s += node.at("communication_s").get<double>() / m.nodes;
    sim.waiting_s += node.at("waiting_s").get<double>() / m.nodes;
  }
  const sim::NodeMeter& meter0 = *s.meters[0];
  sim.bytes_sent_total = meter0.cluster_sent(sim::TrafficSource::Strategy);
  sim.bytes_sent_per_node = sim.bytes_sent_total / m.nodes;
  sim.runtime_bytes_sent_total = meter0.cluster_sent(sim::TrafficSource::Runtime);
  double gradient_bytes = 0;
  for (const auto& p : s.models[block.first]->module().parameters()) {
    if (p.requires_grad()) gradient_bytes += static_cast<double>(p.numel()) * static_cast<double>(p.element_size());
  }
  sim.ddp_bytes_sent_per_node = static_cast<double>(m.max_steps) * sim::all_reduce_traffic(gradient_bytes, m.nodes).sent;
  const double ddp_communication_s = static_cast<double>(m.max_steps) * s.network->all_reduce_time(gradient_bytes);
  auto ratio = [](double a, double b) { return b > 0 ? json(a / b) : json(nullptr); };
  json link = {{"bandwidth_bytes_per_s", s.network->bottleneck().bandwidth},
               {"latency_s", s.network->bottleneck().latency}};
  json summary = {{"name", m.name},
                  {"variant", m.variant},
                  {"run_dir", run_dir.string()},
                  {"model", {{"plugin", m.model.plugin}, {"parameters", parameters}}},
                  {"strategy", m.strategy.plugin},
                  {"nodes", m.nodes},
                  {"steps", r.steps},
                  {"examples_trained", r.examples_trained},
                  {"last_train_loss", r.last_train_loss},
                  {"wall_seconds", r.wall_seconds},
                  {"steps_per_second", r.wall_seconds > 0 ? r.steps / r.wall_seconds : 0.0},
                  // Where the wall time went (this process: process 0 in a multi-process run).
                  {"timing",
                   {{"datasets_s", r.dataset_seconds},
                    {"startup_s", r.startup_seconds - r.dataset_seconds},
                    {"loop_s", r.loop_seconds},
                    {"finish_s", r.wall_seconds - r.startup_seconds - r.loop_seconds}}}};
  if (const int64_t tokens = s.train_data->tokens_per_example(); tokens > 0) {
    summary["tokens_trained"] = r.examples_trained * tokens;
    summary["tokens_per_second"] = r.wall_seconds > 0 ? r.examples_trained * tokens / r.wall_seconds : 0.0;
  }
  summary["final"] = r.final_eval ? eval_json(*r.final_eval, r.metric_names) : json(nullptr);
  summary["communication"] = {
      {"bytes_sent_per_node", sim.bytes_sent_per_node},
      {"bytes_sent_total", sim.bytes_sent_total},
      {"collectives_per_node", meter0.collectives(sim::TrafficSource::Strategy)},
      {"runtime_bytes_sent_total", sim.runtime_bytes_sent_total},
      {"ddp_bytes_sent_per_node", sim.ddp_bytes_sent_per_node},
      {"ratio_to_ddp", ratio(sim.bytes_sent_per_node, sim.ddp_bytes_sent_per_node)},
      {"per_node", per_node}};
  summary["simulated"] = {{"time_s", sim.time_s},
                          {"compute_s", sim.compute_s},
                          {"communication_s", sim.communication_s},
                          {"waiting_s", sim.waiting_s},
                          {"compute", m.compute.step_time ? "fixed" : "measured"},
                          {"network", m.resolved["network"]},
                          {"bottleneck_link", link},
                          {"ddp_estimate_time_s", sim.compute_s + ddp_communication_s},
                          {"ratio_to_ddp_estimate", ratio(sim.time_s, sim.compute_s + ddp_communication_s)}};
  if (m.target_loss) {
    json target = {{"loss", *m.target_loss}, {"reached", r.target_hit.has_value()}};
    if (r.target_hit) {
      target["step"] = r.target_hit->step;
      target["sim_time_s"] = r.target_hit->sim_time_s;
      target["bytes_sent_per_node"] = r.target_hit->bytes_sent;
      target["wall_seconds"] = r.target_hit->wall_seconds;
    }
    summary["target"] = target;
  }
  s.writer->write_summary(summary);
  // Nodes' objects go before the plugins that made them (RunState order).
  s.strategies.clear();
  s.models.clear();
  return r;
}

}  // namespace exogym::runtime::train
