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
#include "exogym/runtime/threads/thread_plan.h"
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

// The replicas, the DiLoCo master and the workers' steps.
class BareLoop {
 public:
  explicit BareLoop(const BareLoopConfig& c)
      : c_(c), barrier_(c.workers), sampler_(c.data->size(), c.nodes, c.batch_size, c.seed) {
    const auto spec = sdk::OptimizerSpec::from_json(c.optimizer, "optimizer");
    at::manual_seed(c.seed);
    replicas_.resize(c.nodes);
    for (int r = 0; r < c.nodes; ++r) {
      Replica& replica = replicas_[r];
      replica.model = c.model_plugin->create_model(c.model_options);
      if (r == 0) replica.model->init_parameters();  // the others copy replica 0, as in the simulator
      replica.model->set_generator(at::detail::createCPUGenerator(c.seed + r));
      replica.model->network().train();
      for (auto& p : replica.model->network().parameters()) replica.params.push_back(p);
      replica.optimizer = spec.build(replica.params);
    }
    at::NoGradGuard no_grad;  // every replica starts from replica 0's weights
    for (int r = 1; r < c.nodes; ++r) {
      for (size_t i = 0; i < replicas_[r].params.size(); ++i) replicas_[r].params[i].copy_(replicas_[0].params[i]);
    }
    num_params_ = replicas_[0].params.size();
    average_.resize(num_params_);
    if (diloco()) {
      // One master copy and one outer optimizer, as the simulator keeps once
      // per process; DiLoCo's default outer optimizer (modules/outer/diloco.h).
      for (auto& p : replicas_[0].params) master_.push_back(p.detach().clone().set_requires_grad(true));
      const nlohmann::json outer_default = {{"name", "sgd"}, {"lr", 0.7}, {"momentum", 0.9}, {"nesterov", true}};
      outer_ = sdk::OptimizerSpec::from_json(c.outer_optimizer, "outer_optimizer", outer_default).build(master_);
    }
  }

  BareLoopResult run() {
    const auto started = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int w = 0; w < c_.workers; ++w) threads.emplace_back([this, w] { work(w); });
    for (auto& thread : threads) thread.join();
    if (error_) std::rethrow_exception(error_);
    BareLoopResult result;
    const auto ended = std::chrono::steady_clock::now();
    result.loop_seconds = std::chrono::duration<double>(ended - started).count();
    if (c_.mark_step >= 0) result.after_mark_seconds = std::chrono::duration<double>(ended - marked_).count();
    result.last_loss = last_loss_;
    return result;
  }

 private:
  bool diloco() const { return c_.diloco_H > 0; }

  // Worker w trains replicas w, w + workers, ...
  void work(int w) {
    runtime::threads::use_intra_op_threads(c_.threads);
    try {
      for (int64_t t = 0; t < c_.steps; ++t) {
        for (int r = w; r < c_.nodes; r += c_.workers) {
          Replica& replica = replicas_[r];
          if (!diloco()) replica.optimizer->zero_grad();
          at::Tensor loss = replica.model->loss(c_.data->get(sampler_.batch_indices(r, t)));
          loss.backward();
          if (r == 0) last_loss_ = loss.item<double>();
          if (diloco()) {
            // The inner step; gradients released, as the simulator does.
            replica.optimizer->step();
            for (auto& p : replica.params) p.mutable_grad().reset();
          }
        }
        if (!(diloco() ? outer_step(w, t) : allreduce_step(w))) return;
        if (w == 0 && t == c_.mark_step) marked_ = std::chrono::steady_clock::now();
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
      barrier_.break_it();
    }
  }

  // After the forward and backward passes: gradients averaged, then every
  // optimizer steps. False once another worker failed.
  bool allreduce_step(int w) {
    if (!barrier_.wait()) return false;
    average_share(w, [](Replica& replica, size_t i) { return replica.params[i].grad(); });
    for (size_t i = w; i < num_params_; i += c_.workers) {
      if (!average_[i].defined()) continue;
      for (int r = 0; r < c_.nodes; ++r) replicas_[r].params[i].mutable_grad().copy_(average_[i]);
      average_[i] = at::Tensor();  // not kept between steps
    }
    if (!barrier_.wait()) return false;
    for (int r = w; r < c_.nodes; r += c_.workers) replicas_[r].optimizer->step();
    return true;
  }

  // DiLoCo's outer step after inner step t, when it is due: parameters
  // averaged, one outer step on the master, copied into every replica.
  bool outer_step(int w, int64_t t) {
    if ((t + 1) % c_.diloco_H != 0 || c_.nodes == 1) return true;
    if (!barrier_.wait()) return false;
    average_share(w, [](Replica& replica, size_t i) { return replica.params[i].detach(); });
    if (!barrier_.wait()) return false;
    at::NoGradGuard no_grad;
    if (w == 0) {
      for (size_t i = 0; i < num_params_; ++i) {
        master_[i].mutable_grad() = master_[i].detach() - average_[i];
        average_[i] = at::Tensor();  // not kept between rounds
      }
      outer_->step();
      for (auto& m : master_) m.mutable_grad().reset();
    }
    if (!barrier_.wait()) return false;
    for (int r = w; r < c_.nodes; r += c_.workers)
      for (size_t i = 0; i < num_params_; ++i) replicas_[r].params[i].detach().copy_(master_[i].detach());
    return true;
  }

  // Worker w's share of the averages: tensors w, w + workers, ..., each
  // summed in rank order into average_; `of` picks the tensor.
  template <typename Of>
  void average_share(int w, Of&& of) {
    at::NoGradGuard no_grad;
    for (size_t i = w; i < num_params_; i += c_.workers) {
      average_[i] = at::Tensor();
      if (!of(replicas_[0], i).defined()) continue;
      at::Tensor sum = of(replicas_[0], i).clone();
      for (int r = 1; r < c_.nodes; ++r) sum.add_(of(replicas_[r], i));
      average_[i] = sum.div_(c_.nodes);
    }
  }

  const BareLoopConfig& c_;
  Barrier barrier_;
  runtime::data::IidSampler sampler_;
  std::vector<Replica> replicas_;
  size_t num_params_ = 0;
  std::vector<at::Tensor> average_;
  std::vector<at::Tensor> master_;
  std::unique_ptr<torch::optim::Optimizer> outer_;
  std::chrono::steady_clock::time_point marked_;
  std::exception_ptr error_;
  std::mutex error_mutex_;
  double last_loss_ = 0;
};

}  // namespace

BareLoopResult run_bare_loop(const BareLoopConfig& config) { return BareLoop(config).run(); }

}  // namespace exogym::bench
