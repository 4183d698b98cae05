#pragma once
// Parameter-name patterns, as options that pick parameters by name take
// them (streaming_diloco's fragments, muon's adamw_params).
#include <string>

namespace exogym::sdk {

// Whether `name` matches `pattern`, where '*' stands for any run of
// characters (dots included) and every other character for itself:
// "layers.0.*" matches "layers.0.weight", "*bias" every bias.
bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace exogym::sdk
