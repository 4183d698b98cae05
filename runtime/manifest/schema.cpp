#include "exogym/runtime/manifest/schema.h"

#include <limits>
#include <string>
#include <utility>

#include "exogym/runtime/manifest/syntax.h"
#include "exogym/runtime/sim/adversary_spec.h"

namespace exogym::runtime::manifest {

namespace {

using nlohmann::json;
using sdk::OptionSpec;
using sdk::OptionSpecs;
using Type = sdk::OptionType;

const char* const kBandwidthNoun = "bandwidth with a unit such as \"1Gbit/s\"";
const char* const kDurationNoun = "duration with a unit such as \"10ms\"";

// The declarations' refinements, each taking and returning a spec so that a
// key stays one expression.
OptionSpec required(OptionSpec spec) {
  spec.required = true;
  return spec;
}

OptionSpec at_most(uint64_t maximum, OptionSpec spec) {
  spec.maximum = maximum;
  return spec;
}

OptionSpec described_as(std::string noun, OptionSpec spec) {
  spec.noun = std::move(noun);
  return spec;
}

OptionSpec named(std::string name, OptionSpec spec) {
  spec.name = std::move(name);
  return spec;
}

constexpr uint64_t kIntMax = std::numeric_limits<int>::max();

OptionSpec section(std::string name, json default_value, std::string doc, OptionSpecs fields) {
  OptionSpec spec{std::move(name), Type::Section, std::move(default_value), std::move(doc)};
  spec.fields = std::move(fields);
  return spec;
}

// {"3": value}: the reader checks that every key is a node of the run.
OptionSpec node_table(std::string name, std::string doc, OptionSpec value) {
  OptionSpec spec{std::move(name), Type::Table, nullptr, std::move(doc)};
  spec.noun = "object keyed by node rank";
  value.name = "<node>";
  spec.fields = {std::move(value)};
  return spec;
}

OptionSpec plugin(const std::string& kind) {
  return required(section(
      kind, nullptr, "the " + kind + " plugin and its options",
      {
          required({"plugin", Type::NonEmptyString, nullptr,
                    "a plugin name (see exogym-run --list-plugins) or the path of a .so file"}),
          {"options", Type::Object, json::object(), "the plugin's options, checked against the options it declares"},
      }));
}

OptionSpec list_of(std::string noun, std::string doc, OptionSpec item) {
  OptionSpec spec{"", Type::List, nullptr, std::move(doc)};
  spec.noun = std::move(noun);
  item.name = "<item>";
  spec.fields = {std::move(item)};
  return spec;
}

// data.*.partition: a name, or an object naming the kind and its keys.
OptionSpec partition() {
  OptionSpec spec{"partition", Type::Tagged, "iid", "how the training examples are shared out among the nodes"};
  spec.noun = "partition: \"iid\", \"contiguous\", or an object such as {\"name\": \"dirichlet\", \"alpha\": 0.1}";
  spec.fields = {
      section("iid", nullptr, "every node draws from the whole set, a new shuffle each epoch", {}),
      section("contiguous", nullptr, "node r owns the r-th of K contiguous slices of the examples", {}),
      section("dirichlet", nullptr,
              "label skew: each label's examples cut among the nodes in proportions drawn from Dir(alpha) "
              "(Hsu, Qi and Brown, 2019)",
              {required({"alpha", Type::PositiveNumber, nullptr,
                         "the concentration: small values give each node few labels, large ones approach IID"})}),
      section(
          "shards", nullptr,
          "label skew: the examples sorted by label, cut into nodes × shards_per_node shards, each node "
          "given shards_per_node of them at random (McMahan et al., 2017)",
          {required(at_most(kIntMax, {"shards_per_node", Type::PositiveInteger, nullptr, "shards each node gets"}))}),
      section("labels", nullptr, "explicit label sets: each node trains on the examples of the labels it lists",
              {required(node_table("nodes", "every node's labels (a label listed by several nodes is split among them)",
                                   list_of("list of labels (integers)", "this node's labels",
                                           {"", Type::Integer, nullptr, "a label"})))}),
  };
  return spec;
}

OptionSpec data_split(std::string name, const char* default_split, std::string doc) {
  return section(std::move(name), nullptr, std::move(doc),
                 {
                     required({"dataset", Type::NonEmptyString, nullptr,
                               "a built-in dataset (mnist, synthetic, text-char, tokens) or a dataset plugin"}),
                     {"path", Type::NonEmptyString, nullptr, "where the data is, relative to the manifest's folder"},
                     {"split", Type::NonEmptyString, default_split, "the dataset's split"},
                     partition(),
                     {"options", Type::Object, json::object(), "the dataset's options"},
                 });
}

OptionSpecs link(json bandwidth, json latency) {
  return {
      described_as(kBandwidthNoun, {"bandwidth", Type::String, std::move(bandwidth), "each node's link bandwidth"}),
      described_as(kDurationNoun, {"latency", Type::String, std::move(latency), "each message's latency"}),
  };
}

// compute.speed_distribution, network.bandwidth_distribution: a factor
// drawn for each node not listed one by one (sim/node_factors.h).
OptionSpec factor_distribution(std::string key, std::string doc) {
  OptionSpec spec{std::move(key), Type::Tagged, nullptr, std::move(doc)};
  spec.noun = "distribution such as {\"name\": \"lognormal\", \"sigma\": 0.5}";
  spec.fields = {
      section("lognormal", nullptr, "exp(sigma * Z), Z standard normal: median 1, half the nodes above and half below",
              {required({"sigma", Type::NonNegativeNumber, nullptr, "the spread of the factor's logarithm"})}),
      section("uniform", nullptr, "uniform between low and high",
              {required({"low", Type::PositiveNumber, nullptr, "the smallest factor"}),
               required({"high", Type::PositiveNumber, nullptr, "the largest factor, at least low"})}),
      section("tiers", nullptr, "a few kinds of node: each value with a probability proportional to its weight",
              {required(named("values", list_of("non-empty list of positive numbers", "the factors",
                                                {"", Type::PositiveNumber, nullptr, "a factor"}))),
               named("weights", list_of("list of positive numbers, one per value", "their weights (default: all equal)",
                                        {"", Type::PositiveNumber, nullptr, "a weight"}))}),
  };
  return spec;
}

OptionSpec network() {
  OptionSpecs fields = link("1Gbit/s", "10ms");
  fields.push_back(described_as(kDurationNoun, {"failure_timeout", Type::String, "30s",
                                                "the simulated time survivors lose noticing that a node failed, at "
                                                "their first collective after the failure"}));
  fields.push_back(factor_distribution("bandwidth_distribution",
                                       "each node's bandwidth: network.bandwidth times a factor drawn from this "
                                       "distribution (nodes whose network.nodes entry gives a bandwidth keep it)"));
  fields.push_back(node_table(
      "nodes", "the links of nodes that differ from the others",
      section("", nullptr, "this node's link; keys it leaves out keep the others'", link(nullptr, nullptr))));
  return section("network", json::object(), "the simulated cluster's links", std::move(fields));
}

// "faults": scheduled failures and late joins (sim/fault_schedule.h).
OptionSpec faults() {
  return named(
      "faults",
      list_of("list of node events such as {\"node\": 3, \"fail_at\": 200, \"rejoin_at\": 260}",
              "nodes that fail at a step (and rejoin at a later one, or never) or join late; a node that rejoins "
              "or joins receives the current state from a live node",
              section("", nullptr, "one node's failure or late join",
                      {
                          required(at_most(kIntMax, {"node", Type::NonNegativeInteger, nullptr, "the node's rank"})),
                          {"fail_at", Type::NonNegativeInteger, nullptr,
                           "the step the node fails at: it takes no part in this step or later ones"},
                          {"rejoin_at", Type::PositiveInteger, nullptr,
                           "the step it is back for, after fail_at (null: it never comes back)"},
                          {"join_at", Type::PositiveInteger, nullptr,
                           "a late joiner (instead of fail_at): the first step it takes part in"},
                      })));
}

// "adversaries": nodes that send corrupted values (sim/adversary_spec.h).
OptionSpec adversaries() {
  OptionSpec attack{"attack", Type::String, "sign_flip",
                    "what the node sends in place of each value x: sign_flip (-scale * x), noise (x + scale * N(0, 1), "
                    "drawn from the run's seed) or constant (scale)",
                    sim::attack_names()};
  return named(
      "adversaries",
      list_of("list of corrupted senders such as {\"node\": 3, \"attack\": \"sign_flip\", \"from_step\": 100}",
              "nodes whose contributions to the strategy's collectives are corrupted on the way out during some "
              "steps, to study robust aggregation; their own training stays honest",
              section("", nullptr, "one node's corruption over a range of steps",
                      {
                          required(at_most(kIntMax, {"node", Type::NonNegativeInteger, nullptr, "the node's rank"})),
                          attack,
                          {"scale", Type::Number, 1.0, "the attack's size (see attack)"},
                          {"from_step", Type::NonNegativeInteger, 0, "the first step it corrupts"},
                          {"until_step", Type::PositiveInteger, nullptr,
                           "the first step it no longer corrupts, after from_step (null: to the end)"},
                      })));
}

OptionSpec churn() {
  const std::string steps_noun =
      "number of steps such as \"500 steps\", or a duration on the simulated clock such as "
      "\"2h\"";
  return section("churn", nullptr,
                 "random failures: every node without a \"faults\" entry fails independently, drawn from the run's "
                 "seed",
                 {
                     required(described_as(steps_noun, {"mtbf", Type::String, nullptr,
                                                        "mean time between failures: a node's up times are "
                                                        "exponentially distributed with this mean"})),
                     required(described_as(steps_noun, {"downtime", Type::String, nullptr,
                                                        "how long a failed node stays down before it rejoins"})),
                 });
}

// "participation": how many nodes take part in each round (sim/participation.h).
OptionSpec participation() {
  return section(
      "participation", nullptr,
      "partial participation: each round of the strategy, only some of the live nodes, drawn from the run's seed, "
      "compute and communicate; give per_round or fraction",
      {
          at_most(kIntMax, {"clients", Type::PositiveInteger, nullptr,
                            "the population each round draws from, at least nodes (default: the nodes); with more "
                            "clients than nodes, each node trains one drawn client at a time"}),
          at_most(kIntMax, {"per_round", Type::PositiveInteger, nullptr, "nodes drawn each round, at most nodes"}),
          {"fraction", Type::Fraction, nullptr,
           "the share of the live nodes drawn each round: ceil(fraction × live nodes), at least 1"},
          {"round", Type::PositiveInteger, nullptr,
           "steps per round, rounds starting at step 0 (default: the strategy's option H)"},
          {"trace", Type::NonEmptyString, nullptr,
           "a CSV file (client,time,available,speed,bandwidth), relative to the manifest's folder: who can be "
           "drawn at each round's start on the simulated clock, and at what speed and bandwidth"},
      });
}

OptionSpec compute() {
  return section("compute", json::object(), "the simulated cluster's compute",
                 {
                     described_as(std::string(kDurationNoun) + ", or \"measured\"",
                                  {"step_time", Type::String, "measured",
                                   "the time of one step at speed 1 (\"measured\": the real time it took)"}),
                     node_table("speed", "speed factors of nodes that differ from 1",
                                described_as("positive speed factor (1 = nominal, 0.5 = half as fast)",
                                             {"", Type::PositiveNumber, nullptr, "this node's speed"})),
                     factor_distribution("speed_distribution",
                                         "the speed factor of every node compute.speed does not list, drawn from "
                                         "this distribution with the run's seed"),
                 });
}

OptionSpec seeds() {
  return named("seeds", list_of("non-empty list of distinct non-negative integers",
                                "run every variant once per seed, the seed replacing \"seed\" (set one of the two); "
                                "the comparison shows the mean and standard deviation over the seeds",
                                at_most(std::numeric_limits<uint64_t>::max(),
                                        required({"", Type::NonNegativeInteger, nullptr, "a seed"}))));
}

OptionSpec precision() {
  return {"precision",
          Type::String,
          "fp32",
          "the forward passes' arithmetic: \"fp32\", or \"bf16\" under autocast (weights, gradients, optimizer "
          "state and communication stay fp32)",
          {"fp32", "bf16"}};
}

OptionSpec execution() {
  return {"execution",
          Type::String,
          "auto",
          "how the nodes of a process compute: \"stacked\" (one forward and backward over [K, ...] stacks of the "
          "nodes' parameters for all of them, for models that support it), \"per_node\" (each node its own), or "
          "\"auto\" (stacked on a GPU where the model and the strategy allow it, per node on the CPU, where that is "
          "faster)",
          {"auto", "stacked", "per_node"}};
}

OptionSpecs top_level() {
  return {
      described_as(kFolderNameNoun,
                   {"name", Type::String, nullptr, "the run's name and folder (default: the manifest file's name)"}),
      at_most(std::numeric_limits<uint64_t>::max(),
              {"seed", Type::NonNegativeInteger, 42, "the seed every random choice of the run derives from"}),
      seeds(),
      at_most(kIntMax, {"nodes", Type::PositiveInteger, 1, "virtual nodes: model replicas training together"}),
      {"device", Type::NonEmptyString, "cpu",
       "\"cpu\", \"auto\", \"cuda\", \"cuda:N\" or \"cuda:N,M,...\"; nodes go round-robin over the devices"},
      precision(),
      execution(),
      at_most(kIntMax, {"parallelism", Type::NonNegativeInteger, 0,
                        "nodes computing at once, at most nodes (0: up to one per core)"}),
      at_most(
          kIntMax,
          {"threads", Type::NonNegativeInteger, 0,
           "intra-op threads per computing node, at most the process's cores (0: the cores shared out among them)"}),
      {"pin_threads", Type::Boolean, true, "each computing node on its own cores"},
      plugin("model"),
      plugin("strategy"),
      required(section("data", nullptr, "the training and validation data",
                       {
                           required(data_split("train", "train", "the training data, shared out among the nodes")),
                           data_split("val", "test", "the validation data (none: no evaluation)"),
                       })),
      required(section("train", nullptr, "the training loop",
                       {
                           required({"max_steps", Type::PositiveInteger, nullptr, "optimizer steps of each node"}),
                           {"batch_size", Type::PositiveInteger, 64, "examples per node and step"},
                           {"minibatch_size", Type::PositiveInteger, nullptr,
                            "examples per forward and backward pass; divides batch_size (default: batch_size)"},
                           {"on_nonfinite",
                            Type::String,
                            "stop",
                            "a training loss or parameter that becomes NaN or infinite: stop the run (exit 1), or "
                            "continue",
                            {"stop", "continue"}},
                       })),
      section("eval", json::object(), "evaluation of node 0's and the averaged model on data.val",
              {
                  {"interval", Type::NonNegativeInteger, 100, "steps between evaluations (0: only after training)"},
                  {"size", Type::NonNegativeInteger, 1024, "validation examples per evaluation (0 without data.val)"},
                  {"batch_size", Type::PositiveInteger, nullptr,
                   "examples per evaluation batch (default: train.minibatch_size)"},
                  described_as("number (a validation loss)",
                               {"target_loss", Type::Number, nullptr,
                                "the averaged model's validation loss to reach; the summary says when it did"}),
              }),
      section("output", json::object(), "where the run's outputs go",
              {
                  {"dir", Type::NonEmptyString, "runs", "the folder of the run folders, relative to the manifest's"},
                  {"save_model", Type::ChoiceSet, true,
                   "the files of the final averaged model: true (all), false (none) or a list of formats, "
                   "\"pt\" (model.pt) and \"safetensors\" (model.safetensors)",
                   model_file_formats()},
              }),
      section("checkpoint", json::object(), "checkpoints a stopped run resumes from (exogym-run --resume)",
              {
                  {"interval", Type::NonNegativeInteger, 0,
                   "steps between checkpoints (0: none); with checkpoints on, the last step and a run stopped by "
                   "Ctrl-C or SIGTERM are saved too"},
                  at_most(kIntMax, {"keep", Type::PositiveInteger, 2, "how many of the newest checkpoints to keep"}),
              }),
      network(),
      faults(),
      churn(),
      adversaries(),
      participation(),
      compute(),
      // Expanded before validation (see variants.h); declared so that it is
      // known, documented and suggested for "run".
      {"runs", Type::Any, nullptr,
       "variants to compare: a list of partial manifests, each merged over this one (JSON merge patch, in which "
       "an object with a \"name\" replaces the one it patches)"},
  };
}

}  // namespace

const std::vector<std::string>& model_file_formats() {
  static const std::vector<std::string> formats = {"pt", "safetensors"};
  return formats;
}

const sdk::OptionSpecs& manifest_schema() {
  static const OptionSpecs schema = top_level();
  return schema;
}

}  // namespace exogym::runtime::manifest
