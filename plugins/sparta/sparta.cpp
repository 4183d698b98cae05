// Strategy "sparta": SPARTA sparse parameter averaging. After every local
// step, a fraction p of every parameter's elements, chosen identically on
// every node from the run's seed, is replaced by its mean over the nodes.
#include "exogym/modules/aggregation/sparta.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("sparta", "1.0.0", exogym::modules::SpartaModule)
