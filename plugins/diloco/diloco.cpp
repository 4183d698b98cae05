// Strategy "diloco": DiLoCo (Douillard et al., 2023). Each node takes H inner
// optimizer steps on its own data; then the nodes average their parameters
// and an outer optimizer (default Nesterov SGD) steps the shared master
// parameters along master - average, which every node then continues from.
#include "exogym/modules/outer/diloco.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("diloco", "1.0.0", exogym::modules::DiLoCoModule)
