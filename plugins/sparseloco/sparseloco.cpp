// Strategy "sparseloco": SparseLoCo (Sarfi et al. 2025). DiLoCo whose
// pseudo-gradient travels as its chunk-wise top-k, quantised to 2 bits,
// with an error buffer per node in place of the outer momentum
// (exogym/modules/outer/sparseloco.h). The error buffers are the client's
// (sdk/client_state.h): with participation a client finds its own when it
// trains again, on whichever node.
#include "exogym/modules/outer/sparseloco.h"

#include <memory>
#include <vector>

#include "exogym/sdk/client_state.h"

namespace exogym::plugins {

namespace {
// Constructed before the composed strategy, which makes the module and
// leaves its address here.
struct ModuleAddress {
  modules::SparseLoCoModule* module = nullptr;
};
}  // namespace

class SparseLoCoStrategy final : private ModuleAddress,
                                 public sdk::CommunicateOptimizeStrategy,
                                 public sdk::ClientState {
 public:
  explicit SparseLoCoStrategy(const nlohmann::json& options)
      : ModuleAddress(),
        CommunicateOptimizeStrategy(sdk::LocalStepOptions::from_json(options), make(options, module)) {}

  static sdk::OptionSpecs specs() {
    return sdk::compose_specs({modules::SparseLoCoModule::specs(), sdk::LocalStepOptions::specs()});
  }

  void save_client_state(sdk::StateDict& out) const override { module->save_client_state(out); }
  void load_client_state(const sdk::StateDict& in) override { module->load_client_state(in); }

 private:
  static std::vector<std::unique_ptr<sdk::CommunicationModule>> make(const nlohmann::json& options,
                                                                     modules::SparseLoCoModule*& address) {
    auto made =
        std::make_unique<modules::SparseLoCoModule>(sdk::ModuleOptions(options, modules::SparseLoCoModule::specs()));
    address = made.get();
    std::vector<std::unique_ptr<sdk::CommunicationModule>> list;
    list.push_back(std::move(made));
    return list;
  }
};

}  // namespace exogym::plugins

EXOGYM_STRATEGY_PLUGIN("sparseloco", "1.0.0", exogym::plugins::SparseLoCoStrategy,
                       exogym::plugins::SparseLoCoStrategy::specs)
