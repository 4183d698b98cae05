#pragma once
// Numbers in the JSON files of a run folder (summary.json). JSON has no
// infinity or NaN, and nlohmann::json writes them as null, which a reader
// then fails on (a simulated time that overflowed, a loss that diverged):
// they are written as the strings "inf", "-inf" and "nan" instead, as
// checkpoints' index.json does, and read back as those numbers.
#include <nlohmann/json.hpp>

namespace exogym::runtime::output {

// `doc` with every number that is not finite, at any depth, as its string.
nlohmann::json with_finite_numbers(nlohmann::json doc);

// A number, or one of those strings, as a double; nlohmann::json's
// type_error for anything else, as get<double>() would throw.
double json_number(const nlohmann::json& value);

}  // namespace exogym::runtime::output
