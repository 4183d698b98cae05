#include "bench/benchmark.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/report_cost.h"
#include "bench/sections.h"
#include "bench/targets.h"
#include "bench/topk_cost.h"
#include "bench/workloads.h"
#include "exogym/runtime/host/cores.h"
#include "exogym/runtime/train/cluster.h"
#include "exogym/runtime/util/atomic_file.h"

namespace exogym::bench {

using nlohmann::json;

int run_benchmark(const BenchOptions& o) {
  json report = {{"machine", {{"cores", runtime::host::available_cores()}}}, {"quick", o.quick}};
  if (o.wants("startup")) report["whole_run"] = whole_run_section(o);
  if (o.wants("overhead")) report["overhead"] = overhead_section(o);
  // The sweep and the memory target count memory beyond the dataset's.
  double dataset = 0;
  if (o.wants("sweep") || o.wants("memory")) {
    dataset = dataset_bytes(o, mnist_data(o));
    report["dataset_bytes"] = dataset;
  }
  if (o.wants("sweep")) report["node_sweep"] = node_sweep_section(o, dataset);
  if (o.wants("parallelism")) report["parallelism_sweep"] = parallelism_section(o);
  if (o.wants("report")) report["report"] = report_section(o);
  if (o.wants("checkpoint")) report["checkpoint"] = checkpoint_section(o);
  if (o.wants("precision")) report["precision"] = precision_section(o);
  if (o.wants("nanogpt16")) report["nanogpt16"] = nanogpt16_section(o);
  if (o.wants("demo")) report["demo"] = demo_section(o);
  if (o.wants("nonfinite")) report["nonfinite"] = nonfinite_section(o);
  if (o.wants("population")) report["population"] = population_section(o);
  if (o.wants("stacked")) report["stacked"] = stacked_section(o);
  if (o.wants("torchscript")) report["torchscript"] = torchscript_section(o);
  if (o.wants("topk")) report["topk"] = topk_section(o);
  report["targets"] = check_targets(o, report, dataset);
  if (!o.json_file.empty()) {
    runtime::util::write_file_atomically(o.json_file, report.dump(2) + "\n");
    std::cout << "\nwrote " << o.json_file << '\n';
  }
  return 0;
}

}  // namespace exogym::bench
