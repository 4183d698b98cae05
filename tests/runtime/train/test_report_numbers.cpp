// Numbers that leave a process as JSON text (metric rows of other processes, their reports, the
// evaluation a checkpoint keeps) arrive as they left, infinities included: nlohmann::json writes
// them as null, which read back as NaN before.
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/runtime/output/run_writer.h"
#include "exogym/runtime/train/metric_buffer.h"
#include "testing.h"

namespace exogym::test {

namespace {

struct RecordedMetrics final : sdk::MetricSink {
  std::vector<double> values;
  void record(int, int64_t, const std::string&, double value) override { values.push_back(value); }
};

}  // namespace

TEST_CASE("metric rows of another process keep infinities and NaN through JSON text", "[train]") {
  const double inf = std::numeric_limits<double>::infinity();
  runtime::train::MetricBuffer buffer;
  for (double v : {inf, -inf, std::numeric_limits<double>::quiet_NaN(), 1.5}) buffer.record(1, 7, "grad_norm", v);
  RecordedMetrics sink;
  runtime::train::replay_metrics(nlohmann::json::parse(buffer.take_rows().dump()), sink);
  REQUIRE(sink.values.size() == 4);
  CHECK(sink.values[0] == inf);
  CHECK(sink.values[1] == -inf);
  CHECK(std::isnan(sink.values[2]));
  CHECK(sink.values[3] == 1.5);
  // Rows written as null (a checkpoint of before) still read as NaN.
  RecordedMetrics old;
  runtime::train::replay_metrics(nlohmann::json::parse(R"([[0, 3, "loss", null]])"), old);
  REQUIRE(old.values.size() == 1);
  CHECK(std::isnan(old.values[0]));
}

TEST_CASE("an evaluation's values keep infinities and NaN through JSON text", "[train]") {
  const double inf = std::numeric_limits<double>::infinity();
  runtime::output::EvalValues v;
  v.loss = inf;
  v.metrics = {std::numeric_limits<double>::quiet_NaN(), 0.25, -inf};
  const std::string text = v.to_json().dump();
  CHECK(text == R"({"loss":"inf","metrics":["nan",0.25,"-inf"]})");
  const runtime::output::EvalValues back = runtime::output::EvalValues::from_json(nlohmann::json::parse(text));
  CHECK(back.loss == inf);
  REQUIRE(back.metrics.size() == 3);
  CHECK(std::isnan(back.metrics[0]));
  CHECK(back.metrics[1] == 0.25);
  CHECK(back.metrics[2] == -inf);
}

}  // namespace exogym::test
