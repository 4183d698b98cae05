#include "bare_loop.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "exogym/runtime/data/sampler.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/optim.h"

namespace exogym::bench {

namespace {

// A reusable barrier for the worker threads (C++17 has none). A worker that
// fails breaks it, so that the others stop instead of waiting forever.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  // Returns false once the barrier is broken.
  bool wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_) return false;
    const uint64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation || broken_; });
    }
    return !broken_;
  }
  void break_it() {
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = true;
    cv_.notify_all();
  }

 private:
  const int count_;
  int arrived_ = 0;
  bool broken_ = false;
  uint64_t generation_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
};

struct Replica {
  std::shared_ptr<sdk::Model> model;
  std::vector<at::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

}  // namespace

BareLoopResult run_bare_loop(const BareLoopConfig& c) {
  const auto spec = sdk::OptimizerSpec::from_json(c.optimizer, "optimizer");
  at::manual_seed(c.seed);
  std::vector<Replica> replicas(c.nodes);
  for (int r = 0; r < c.nodes; ++r) {
    Replica& replica = replicas[r];
    replica.model = c.model_plugin->create_model(c.model_options);
    if (r == 0) replica.model->init_parameters();  // the others copy replica 0, as in the simulator
    replica.model->set_generator(at::detail::createCPUGenerator(c.seed + r));
    replica.model->module().train();
    for (auto& p : replica.model->module().parameters()) replica.params.push_back(p);
    replica.optimizer = spec.build(replica.params);
  }
  {
    at::NoGradGuard no_grad;  // every replica starts from replica 0's weights
    for (int r = 1; r < c.nodes; ++r) {
      for (size_t i = 0; i < replicas[r].params.size(); ++i) replicas[r].params[i].copy_(replicas[0].params[i]);
    }
  }
  runtime::data::IidSampler sampler(c.data->size(), c.nodes, c.batch_size, c.seed);
  const size_t num_params = replicas[0].params.size();

  Barrier barrier(c.workers);
  std::exception_ptr error;
  std::mutex error_mutex;
  double last_loss = 0;
  auto worker = [&](int w) {
    at::set_num_threads(c.threads);
    try {
      for (int64_t t = 0; t < c.steps; ++t) {
        for (int r = w; r < c.nodes; r += c.workers) {
          Replica& replica = replicas[r];
          replica.optimizer->zero_grad();
          at::Tensor loss = replica.model->loss(c.data->get(sampler.batch_indices(r, t)));
          loss.backward();
          if (r == 0) last_loss = loss.item<double>();
        }
        if (!barrier.wait()) return;
        {
          // Average every gradient in rank order; worker w reduces tensors
          // w, w + workers, ...
          at::NoGradGuard no_grad;
          for (size_t i = w; i < num_params; i += c.workers) {
            if (!replicas[0].params[i].grad().defined()) continue;
            at::Tensor sum = replicas[0].params[i].grad().clone();
            for (int r = 1; r < c.nodes; ++r) sum.add_(replicas[r].params[i].grad());
            sum.div_(c.nodes);
            for (int r = 0; r < c.nodes; ++r) replicas[r].params[i].mutable_grad().copy_(sum);
          }
        }
        if (!barrier.wait()) return;
        for (int r = w; r < c.nodes; r += c.workers) replicas[r].optimizer->step();
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      barrier.break_it();
    }
  };

  const auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < c.workers; ++w) threads.emplace_back(worker, w);
  for (auto& thread : threads) thread.join();
  if (error) std::rethrow_exception(error);
  BareLoopResult result;
  result.loop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  result.last_loss = last_loss;
  return result;
}

}  // namespace exogym::bench
