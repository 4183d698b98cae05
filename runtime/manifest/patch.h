#pragma once
// How one manifest document is patched by another: a variant of "runs" over
// the base, each --set over the manifest (and so over a resumed run's
// recorded one). One rule for all of them, so that a partition, an optimizer
// or a plugin switched in a variant is switched the same way by --set.
#include <nlohmann/json.hpp>

namespace exogym::runtime::manifest {

// Applies `patch` (a JSON object) to `doc` key by key, as a JSON merge patch
// (RFC 7396) that knows named objects:
// - null removes the key;
// - an object with a "name" (an optimizer, a learning-rate schedule, a
//   partition) is complete: it replaces the value there, so that nothing of
//   another kind leaks into it ("alpha" of a Dirichlet partition into
//   "shards"), and what it leaves out takes its kind's defaults;
// - an object without "name" refines the value there key by key, by these
//   same rules; a name given alone ("sgd") is refined as {"name": "sgd"};
// - an object naming another "plugin" or "dataset" than the one there
//   refines it without its "options", which belong to the one it replaces;
// - anything else (a number, a string, a list) replaces the value there.
// `doc`'s own keys are always refined: its "name" names the run.
void apply_patch(nlohmann::json& doc, const nlohmann::json& patch);

// Whether `value` is an object with a "name" (not null): in a patch, a
// complete object that replaces what it patches.
bool is_named(const nlohmann::json& value);

}  // namespace exogym::runtime::manifest
