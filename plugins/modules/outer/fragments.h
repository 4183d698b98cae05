#pragma once
// Cutting a model's parameter tensors into fragments that synchronise apart
// (streaming_diloco.h). A fragment is a list of tensor positions, in the
// order of sdk::trainable_parameters (the model's order, the same on every
// node); every tensor is in exactly one fragment, and no fragment is empty.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace exogym::modules {

using Fragments = std::vector<std::vector<size_t>>;

// P contiguous groups of tensors in model order (layer groups), as equal in
// elements as a contiguous cut allows: the largest group is as small as it
// can be (it sets the peak of what one synchronisation sends), each group
// taking as many tensors as fit under that size while leaving one for each
// group after it. Throws sdk::ConfigError at `json_path` when P exceeds the
// number of tensors or is below 1.
Fragments fragments_by_size(const std::vector<int64_t>& numels, int64_t P, const std::string& json_path);

// The layer a parameter belongs to: the first component of its dotted name
// that is a number ("transformer.h.3.attn.c_attn.weight": 3), or -1 for
// none (embeddings, a final norm).
int64_t layer_index(const std::string& name);

// P strided groups of layers, as the Streaming DiLoCo paper prefers them:
// with the model's numbered layers in order l_0 < l_1 < ..., layer l_r goes
// to fragment r mod P, so that every fragment spans the depth of the model.
// A tensor outside the numbered layers goes with the layered tensor before
// it in model order (the first layer's fragment when none is before it: the
// embeddings join fragment 0, a final norm the last layer's). Throws
// sdk::ConfigError at `json_path` when the names show fewer than P layers.
Fragments fragments_by_layer_stride(const std::vector<std::string>& names, int64_t P, const std::string& json_path);

// One fragment per pattern: a tensor joins the first pattern its name
// matches (sdk::glob_match, sdk/name_pattern.h). Throws sdk::ConfigError at
// `json_path` (or `json_path`[i] for pattern i) for a tensor no pattern
// matches and for a pattern that gets no tensor, naming them.
Fragments fragments_by_pattern(const std::vector<std::string>& names, const std::vector<std::string>& patterns,
                               const std::string& json_path);

// The fragments a "fragments" option asks for: a positive integer P
// (fragments_by_size), {"count": P, "pattern": "contiguous"} (the same) or
// {"count": P, "pattern": "strided"} (fragments_by_layer_stride), or a
// non-empty list of name patterns (fragments_by_pattern). Throws
// sdk::ConfigError at `json_path` for any other value.
Fragments make_fragments(const nlohmann::json& option, const std::vector<std::string>& names,
                         const std::vector<int64_t>& numels, const std::string& json_path);
// Checks the option's form only (no model needed): what make_fragments
// refuses before looking at the tensors.
void check_fragments_option(const nlohmann::json& option, const std::string& json_path);

}  // namespace exogym::modules
