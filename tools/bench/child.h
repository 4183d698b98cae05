#pragma once
// The child's side of a measurement (harness.h): it runs one measurement and
// prints its JSON after kResultPrefix on standard output.
//
// A spec's "kind" says what to measure: "simulator" (a quiet simulator run,
// its loop, start-up and memory), "bare" (the same work in the bare loop,
// bare_loop.h), "nonfinite" (the non-finite check), "demo" (DeMo's
// compression against the model's step, demo_cost.cpp) or "dataset" (the
// memory a dataset takes).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/sdk/dataset.h"

namespace exogym::bench {

inline constexpr const char* kResultPrefix = "RESULT ";

// Seconds since this process started (from /proc: 10 ms resolution).
double process_age();

// Runs the measurement `spec_text` (JSON); `age_at_main`: process_age() at
// the start of main, before anything else ran. Returns the exit status.
int run_child(const std::string& spec_text, double age_at_main);

// What the children share: the plugin loader of a spec ("plugin_path"),
// and the training split of its built-in dataset ("data").
runtime::plugin::PluginLoader make_loader(const nlohmann::json& spec);
std::shared_ptr<const sdk::Dataset> load_dataset(const nlohmann::json& spec);

// The "demo" measurement (demo_cost.cpp): one node's forward and backward
// passes against DeMo's compression of its gradients, per step.
nlohmann::json child_demo(const nlohmann::json& spec);

}  // namespace exogym::bench
