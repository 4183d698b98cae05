#pragma once
// The child's side of a measurement (harness.h): it runs one measurement and
// prints its JSON after kResultPrefix on standard output.
//
// A spec's "kind" says what to measure: "simulator" (a quiet simulator run,
// its loop, start-up and memory), "bare" (the same work in the bare loop,
// bare_loop.h) or "dataset" (the memory a dataset takes).
#include <string>

namespace exogym::bench {

inline constexpr const char* kResultPrefix = "RESULT ";

// Seconds since this process started (from /proc: 10 ms resolution).
double process_age();

// Runs the measurement `spec_text` (JSON); `age_at_main`: process_age() at
// the start of main, before anything else ran. Returns the exit status.
int run_child(const std::string& spec_text, double age_at_main);

}  // namespace exogym::bench
