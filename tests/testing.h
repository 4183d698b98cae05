#pragma once
// Include this instead of <catch2/catch.hpp>. LibTorch's glog defines CHECK
// too, and whichever header comes last wins: after glog's, a failing CHECK
// aborts the whole test binary instead of failing one test case. Including
// glog first (it has include guards) lets Catch's definitions win for good.
#include <c10/util/Logging.h>

#include <catch2/catch.hpp>
