#pragma once
// The precompiled header of the project's own libraries, plugins and models
// (cmake/PrecompiledHeaders.cmake): LibTorch's and nlohmann/json's headers,
// parsed once per build instead of once per source. Parsing them was most of
// a source's compile time (a 68-line strategy: 10.4 of its 11.8 s), and CI
// builds the project three times.
//
// Only headers from outside the project belong here: a change to one of ours
// would rebuild the header and every source. The test binary has its own
// (tests/support/precompiled.h), which must put Catch2's setup first.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>
