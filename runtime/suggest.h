#pragma once
// "Did you mean" suggestions for misspelt manifest keys, option names and
// plugin names: a typo should point at the fix, not just say "unknown".
#include <cstddef>
#include <string>
#include <vector>

namespace exogym::runtime {

// Optimal-string-alignment distance: insertions, deletions, substitutions and
// swaps of two adjacent characters each cost 1 ("nodse" is 1 from "nodes").
// Case-insensitive, since "Nodes" for "nodes" is one fix, not one per letter.
std::size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word` within distance 2, or "" when none is. Ties
// go to the earlier candidate. A distance equal to the length of the longer
// word means nothing was kept ("x" vs "lr"), so that is no suggestion either.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace exogym::runtime
