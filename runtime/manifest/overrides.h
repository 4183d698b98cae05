#pragma once
// "--set a.b.c=value": a manifest field overridden from the command line.
#include <nlohmann/json.hpp>
#include <string>

namespace exogym::runtime::manifest {

// Applies one assignment to a manifest document. The value is parsed as JSON
// when it is valid JSON (5, true, null, [1,2], "quoted"), else taken as a
// plain string (adamw, cuda:0). KEY=VALUE is applied as the patch
// {"K": {"E": {"Y": VALUE}}} by apply_patch (patch.h), as a variant is: null
// removes the key, a named object ({"name": "shards", ...}) replaces the
// value there, an unnamed one refines it, and a.b.name=x replaces the named
// object a.b with {"name": "x"}, which later assignments of a.b.* refine.
// Missing intermediate objects are created. Throws sdk::ConfigError at path
// "--set" for bad syntax, a path through a number, boolean or list, or a path
// under "runs", leaving `doc` unchanged.
void apply_override(nlohmann::json& doc, const std::string& assignment);

}  // namespace exogym::runtime::manifest
