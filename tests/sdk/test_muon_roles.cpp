// Which matrices Muon orthogonalises (sdk/internal/muon.h): the model's
// declared embeddings and head (Model::embedding_and_head_parameters) take
// the AdamW step, as Muon's reference hands them over; adamw_params' name
// patterns override the declaration; the errors name the option.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exogym/sdk/error.h"
#include "exogym/sdk/internal/muon.h"
#include "exogym/sdk/model.h"
#include "exogym/sdk/optim.h"
#include "exogym/sdk/optim_state.h"
#include "sdk_fixtures.h"
#include "testing.h"

namespace exogym::test {

namespace {

using nlohmann::json;

// An embedding, a hidden weight, its bias and a head, declared as the
// built-in models declare theirs.
class RolesModel final : public sdk::Model {
 public:
  explicit RolesModel(std::vector<std::string> declared)
      : net_(std::make_shared<torch::nn::Module>()), declared_(std::move(declared)) {
    for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"embed", {6, 4}}, {"hidden", {4, 4}}, {"bias", {4}}, {"head", {3, 4}}}) {
      const int64_t n = at::ones(shape).numel();
      params_.push_back(net_->register_parameter(
          name, at::sin(at::arange(n, at::kFloat) * 0.7 + static_cast<double>(params_.size())).reshape(shape)));
    }
  }
  torch::nn::Module& network() override { return *net_; }
  at::Tensor loss(const sdk::Batch&) override { return params_[0].sum(); }
  std::vector<std::string> embedding_and_head_parameters() const override { return declared_; }

  std::vector<at::Tensor> params() const { return params_; }
  void set_gradients(int step) {
    for (size_t i = 0; i < params_.size(); ++i)
      params_[i].mutable_grad() =
          at::cos(at::arange(params_[i].numel(), at::kFloat) * 0.3 + step + double(i)).reshape(params_[i].sizes());
  }

 private:
  std::shared_ptr<torch::nn::Module> net_;
  std::vector<std::string> declared_;
  std::vector<at::Tensor> params_;
};

const sdk::internal::Muon& as_muon(const torch::optim::Optimizer& optimizer) {
  return dynamic_cast<const sdk::internal::Muon&>(optimizer);
}

// Which of the model's parameters (embed, hidden, bias, head) Muon orthogonalises.
std::vector<bool> orthogonalised(RolesModel& model, const json& spec) {
  auto optimizer = sdk::OptimizerSpec::from_json(spec, "optimizer").build(model.params(), &model);
  std::vector<bool> out;
  for (const auto& p : model.params()) out.push_back(as_muon(*optimizer).orthogonalises(p));
  return out;
}

}  // namespace

TEST_CASE("muon: the model's embeddings and head take AdamW's step, adamw_params overrides", "[sdk][optim][muon]") {
  RolesModel model({"embed", "head"});
  const json muon = {{"name", "muon"}};
  CHECK(orthogonalised(model, muon) == std::vector<bool>{false, true, false, false});
  // Without the model every matrix is orthogonalised, as an outer optimizer's.
  auto outer = sdk::OptimizerSpec::from_json(muon, "optimizer").build(model.params());
  CHECK(as_muon(*outer).orthogonalises(model.params()[0]));
  CHECK(as_muon(*outer).orthogonalises(model.params()[3]));
  // [] orthogonalises every matrix; patterns pick by name ("*" any characters).
  json every = muon, pick = muon;
  every["adamw_params"] = json::array();
  pick["adamw_params"] = {"h*d"};
  CHECK(orthogonalised(model, every) == std::vector<bool>{true, true, false, true});
  CHECK(orthogonalised(model, pick) == std::vector<bool>{true, true, false, false});
  // A model that declares nothing: every matrix, as before ABI 16.
  RolesModel silent({});
  CHECK(orthogonalised(silent, muon) == std::vector<bool>{true, true, false, true});
}

TEST_CASE("muon: a declared head steps exactly as torch::optim::AdamW with the fallback's settings",
          "[sdk][optim][muon]") {
  RolesModel ours({"embed", "head"}), theirs({});
  auto muon = sdk::OptimizerSpec::from_json({{"name", "muon"}, {"adamw_lr", 2e-3}, {"adamw_weight_decay", 0.1}}, "o")
                  .build(ours.params(), &ours);
  const at::Tensor head = theirs.params()[3];
  torch::optim::AdamW adamw({head}, torch::optim::AdamWOptions(2e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  for (int step = 0; step < 4; ++step) {
    ours.set_gradients(step);
    theirs.set_gradients(step);
    muon->step();
    adamw.step();
  }
  CHECK(ours.params()[3].detach().equal(head.detach()));  // every element equal
  // The hidden matrix took Muon's step: not AdamW's.
  CHECK_FALSE(ours.params()[1].detach().equal(theirs.params()[1].detach()));
}

TEST_CASE("muon: adamw_params that match nothing, a model without names, nothing left to orthogonalise",
          "[sdk][optim][muon]") {
  RolesModel model({"embed", "head"});
  auto build = [&](const json& spec, sdk::Model* with) {
    return config_error([&] { sdk::OptimizerSpec::from_json(spec, "optimizer").build(model.params(), with); });
  };
  const sdk::ConfigError typo = build({{"name", "muon"}, {"adamw_params", {"head", "lm_head*"}}}, &model);
  CHECK(typo.path() == "optimizer.adamw_params[1]");
  CHECK(typo.message() ==
        "the pattern \"lm_head*\" matches no parameter; the model has \"embed\", \"hidden\", \"bias\", \"head\"");
  const sdk::ConfigError nameless = build({{"name", "muon"}, {"adamw_params", {"head"}}}, nullptr);
  CHECK(nameless.path() == "optimizer.adamw_params");
  const sdk::ConfigError nothing_left = build({{"name", "muon"}, {"adamw_params", {"*"}}}, &model);
  CHECK(nothing_left.path() == "optimizer");
  CHECK(nothing_left.message() ==
        "muon has no matrix left to orthogonalise: all 3 take AdamW's step, as adamw_params picks them; use adamw for "
        "this model, or adamw_params [] to orthogonalise every matrix");
  // A one-layer classifier: its only matrix is its head.
  RolesModel head_only({"embed", "hidden", "head"});
  const sdk::ConfigError declared =
      config_error([&] { sdk::OptimizerSpec::from_json("muon", "optimizer").build(head_only.params(), &head_only); });
  CHECK_THAT(declared.message(), Catch::Contains("as the model declares them its embeddings or output head"));
  // A model that declares a name its network does not have: the plugin's bug, said.
  RolesModel wrong({"lm_head.weight"});
  CHECK_THROWS_WITH(sdk::OptimizerSpec::from_json("muon", "o").build(wrong.params(), &wrong),
                    Catch::Contains("embedding_and_head_parameters() names \"lm_head.weight\", which its network() "
                                    "has no parameter of"));
}

TEST_CASE("muon: a state saved with the head orthogonalised does not load where the head is on AdamW",
          "[sdk][optim][muon]") {
  RolesModel model({"embed", "head"});
  auto every = sdk::OptimizerSpec::from_json({{"name", "muon"}, {"adamw_params", json::array()}}, "o")
                   .build(model.params(), &model);
  model.set_gradients(0);
  every->step();
  sdk::StateDict saved;
  sdk::save_optimizer_state(*every, model.params(), saved, "opt.");
  CHECK(saved.count("opt.3.momentum_buffer") == 1);
  auto declared = sdk::OptimizerSpec::from_json("muon", "o").build(model.params(), &model);
  CHECK_THROWS_WITH(sdk::load_optimizer_state(*declared, model.params(), saved, "opt."),
                    "optimizer state opt.0.momentum_buffer: this optimizer keeps exp_avg, exp_avg_sq, max_exp_avg_sq "
                    "for that parameter, not momentum_buffer (was the state written by another optimizer, or by muon "
                    "with other adamw_params?)");
}

}  // namespace exogym::test
