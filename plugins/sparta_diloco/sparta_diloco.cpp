// Strategy "sparta_diloco": SPARTA's sparse averaging after every
// sparta_interval-th local step, plus DiLoCo's full average and outer step
// after every H local steps (on such a step the sparse averaging runs first).
#include "exogym/modules/aggregation/sparta.h"
#include "exogym/modules/outer/diloco.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("sparta_diloco", "1.0.0", exogym::modules::SpartaModule, exogym::modules::DiLoCoModule)
