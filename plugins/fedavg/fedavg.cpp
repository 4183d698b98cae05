// Strategy "fedavg": federated averaging. Each node takes H local optimizer
// steps on its own data, then the nodes average their parameters (over all
// nodes, or within random islands of island_size nodes).
#include "exogym/modules/outer/fedavg.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("fedavg", "1.0.0", exogym::modules::FedAvgModule)
