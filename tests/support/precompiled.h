#pragma once
// The test binary's precompiled header (tests/CMakeLists.txt): the
// third-party headers most test sources include, parsed once per build
// instead of once per source. Parsing headers is about half of a test
// source's compile time, and CI builds the tests three times.
//
// Only headers from outside the project belong here: a change to one of
// ours would rebuild the header and so every test source. testing.h is the
// exception, because it must come first: it includes glog before Catch2, so
// that Catch2's CHECK is the one every test sees.
// clang-format off
#include "testing.h"
// clang-format on

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
