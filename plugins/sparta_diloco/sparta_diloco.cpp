// Strategy "sparta_diloco": SPARTA's sparse averaging after every
// sparta_interval-th local step, plus DiLoCo's full average and outer step
// after every H local steps (on such a step the sparse averaging runs first).
#include <memory>
#include <vector>

#include "exogym/modules/diloco.h"
#include "exogym/modules/sparta.h"
#include "exogym/sdk/compose.h"

namespace exogym::plugins {

using modules::DiLoCoModule;
using modules::SpartaModule;
using sdk::OptionSpec;
using sdk::OptionType;

static sdk::OptionSpecs sparta_diloco_options() {
  sdk::OptionSpecs specs = SpartaModule::specs();
  specs.push_back(OptionSpec{"sparta_interval", OptionType::PositiveInteger, 1,
                             "sparse averaging only after steps t with t % sparta_interval == 0 (0-based)"});
  specs = sdk::concat_specs(std::move(specs), DiLoCoModule::specs());
  return sdk::concat_specs(std::move(specs), sdk::LocalStepOptions::specs());
}

class SpartaDiLoCoStrategy final : public sdk::CommunicateOptimizeStrategy {
 public:
  explicit SpartaDiLoCoStrategy(const nlohmann::json& options)
      : CommunicateOptimizeStrategy(sdk::LocalStepOptions::from_json(options), modules(options)) {}

 private:
  static std::vector<std::unique_ptr<sdk::CommunicationModule>> modules(const nlohmann::json& options) {
    std::vector<std::unique_ptr<sdk::CommunicationModule>> list;
    list.push_back(std::make_unique<SpartaModule>(options));  // reads p, selector, sparta_interval
    list.push_back(std::make_unique<DiLoCoModule>(options));  // reads H, outer_optimizer
    return list;
  }
};

}  // namespace exogym::plugins

EXOGYM_STRATEGY_PLUGIN("sparta_diloco", "1.0.0", exogym::plugins::SpartaDiLoCoStrategy,
                       exogym::plugins::sparta_diloco_options)
