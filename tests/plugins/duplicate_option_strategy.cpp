// Must not load: a composition of two modules that both declare "H", so one
// manifest value would set both. Its options function (run at load) throws,
// and the loader refuses the plugin naming both modules.
#include "exogym/modules/outer/diloco.h"
#include "exogym/modules/outer/fedavg.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("duplicate_option", "1.0.0", exogym::modules::DiLoCoModule, exogym::modules::FedAvgModule)
