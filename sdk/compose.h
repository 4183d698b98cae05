#pragma once
// Composing a strategy: each node takes a local optimizer step (with
// optional clipping and an LR schedule), then communication modules run in
// order, each deciding when it acts. FedAvg, DiLoCo, SPARTA
// and SPARTA+DiLoCo are such compositions, and a third party can write only
// a module (a CommunicationModule with a static specs() returning its
// ModuleSpecs and a constructor taking ModuleOptions):
//
//   EXOGYM_MODULE_STRATEGY_PLUGIN("mine", "1.0.0", MyModule)
//   EXOGYM_MODULE_STRATEGY_PLUGIN("two", "1.0.0", exogym::modules::SpartaModule, MyModule)
//
// exports ComposedStrategy<Modules...>: the local step, then the modules in
// that order; its options are theirs and the local step's (optimizer,
// lr_schedule, max_norm). Every strategy derives from Strategy
// (strategy.h); one that needs more than modules holds a LocalStep, and
// modules, itself.
#include <ATen/core/Tensor.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/sdk/local_step.h"
#include "exogym/sdk/options.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/strategy.h"

namespace exogym::sdk {

// What a composed strategy does after each local optimizer step: usually
// communicate (FedAvg, DiLoCo, SPARTA), possibly a purely local update (an
// outer step). The strategy makes its modules in its constructor (main
// thread) and calls them from its node's thread, in list order; exceptions
// propagate out of the strategy's init() or step() and end the run as a
// strategy's do (strategy.h).
class CommunicationModule {
 public:
  virtual ~CommunicationModule() = default;

  // From the strategy's init(), after the local optimizer is built: every
  // node holds the same parameters (the initial broadcast). Optional.
  virtual void init(NodeContext& /*ctx*/, Model& /*model*/) {}

  // After the local optimizer step of every step (`step` = ctx.step), on
  // every node, once the gradients are released: the module decides whether
  // to act at `step`. Its collectives must be the same on every node, so
  // decide from `step` and state every node shares, never this node's data.
  virtual void communicate(NodeContext& ctx, Model& model, int64_t step) = 0;

  // From the strategy's save_state() / load_state(), with `prefix`
  // ("module0.", "module1.", ...: the module's position) to put before its
  // keys. Optional (default: no state).
  virtual void save_state(StateDict& /*out*/, const std::string& /*prefix*/) const {}
  virtual void load_state(const StateDict& /*in*/, const std::string& /*prefix*/) {}

  // Failures (Strategy::recovery_state): what the module sends a node that
  // comes back, and how that node takes it. Default: save_state/load_state.
  virtual void recovery_state(StateDict& out, const std::string& prefix) const { save_state(out, prefix); }
  virtual void load_recovery_state(Model& /*model*/, const StateDict& in, const std::string& prefix) {
    load_state(in, prefix);
  }
  // Whether a node that comes back takes the donor's parameters and local
  // optimizer state (true), or restarts from the modules' recovery state
  // with a fresh local optimizer (false: DiLoCo, whose node restarts from
  // the master copy). If any module says false, neither is sent.
  virtual bool recovers_model() const { return true; }

  // State that is the client's (Strategy::has_client_state), under the same
  // prefix. A composed strategy has client state when one of its modules
  // has. Optional (default: none).
  virtual bool has_client_state() const { return false; }
  virtual void save_client_state(StateDict& /*out*/, const std::string& /*prefix*/) const {}
  virtual void load_client_state(const StateDict& /*in*/, const std::string& /*prefix*/) {}
};

// The options one part of a composed strategy declares, with the part's
// name for messages: a module's static specs() returns them.
struct ModuleSpecs {
  std::string module;  // "DiLoCoModule"
  OptionSpecs specs;
};

// A composed strategy's options: every part's, in order. Two parts declaring
// one name would read one value for two purposes, so that throws PluginError
// at plugin load: option "H" is declared by both DiLoCoModule and FedAvgModule.
OptionSpecs compose_specs(const std::vector<ModuleSpecs>& parts);

// What one part sees of the strategy's validated options: only those its
// specs declare, so that no module depends on another's options. Reading
// any other throws InternalError naming the module and the option.
class ModuleOptions {
 public:
  // `validated_options` holds every option of `declared` (validate_options).
  ModuleOptions(const nlohmann::json& validated_options, const ModuleSpecs& declared);
  const nlohmann::json& at(const std::string& name) const;
  const std::string& module() const { return module_; }

 private:
  std::string module_;
  nlohmann::json options_;  // the declared options only
};

namespace detail {
// What ComposedStrategy does, for any list of modules.
class Composition : public Strategy {
 public:
  Composition(LocalStepOptions local, std::vector<std::unique_ptr<CommunicationModule>> modules);
  ~Composition() override;

  void init(NodeContext& ctx, Model& model) final;
  void zero_grad() final;
  // The local step, then each module communicates.
  void step() final;
  double lr() const final { return local_.lr(); }
  // The local optimizer's state as "local.<...>", module i's under
  // "module<i>.".
  void save_state(StateDict& out) const final;
  void load_state(const StateDict& in) final;
  void recovery_state(Model& model, StateDict& out) const final;
  void load_recovery_state(Model& model, const StateDict& in) final;
  bool has_client_state() const final;
  void save_client_state(StateDict& out) const final;
  void load_client_state(const StateDict& in) final;

 private:
  bool recovers_model() const;
  LocalStep local_;
  std::vector<std::unique_ptr<CommunicationModule>> modules_;
  NodeContext* ctx_ = nullptr;
  Model* model_ = nullptr;
};
}  // namespace detail

// The local step, then each of Modules... made from its own options,
// Module(ModuleOptions(options, Module::specs())).
template <class... Modules>
class ComposedStrategy final : public detail::Composition {
 public:
  explicit ComposedStrategy(const nlohmann::json& options)
      : Composition(LocalStepOptions::from_json(options), make(options)) {}
  static OptionSpecs specs() { return compose_specs({Modules::specs()..., LocalStepOptions::specs()}); }

 private:
  static std::vector<std::unique_ptr<CommunicationModule>> make(const nlohmann::json& options) {
    std::vector<std::unique_ptr<CommunicationModule>> list;
    (list.push_back(std::make_unique<Modules>(ModuleOptions(options, Modules::specs()))), ...);
    return list;
  }
};

}  // namespace exogym::sdk

// At global scope. The alias keeps the modules' commas out of the inner macro's arguments.
#define EXOGYM_MODULE_STRATEGY_PLUGIN(name, version, ...)                      \
  namespace exogym_plugin_exports {                                            \
  using ModuleStrategy = ::exogym::sdk::ComposedStrategy<__VA_ARGS__>;         \
  }                                                                            \
  EXOGYM_STRATEGY_PLUGIN(name, version, exogym_plugin_exports::ModuleStrategy, \
                         exogym_plugin_exports::ModuleStrategy::specs)
