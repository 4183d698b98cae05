// Strategy "async_diloco": asynchronous DiLoCo with delayed Nesterov and
// dynamic local updates (Liu et al. 2024). Each node sends its
// pseudo-gradient when its round ends; the server steps its model with each
// as it arrives on the simulated clock; no node waits for another.
#include "exogym/modules/async/async_diloco.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("async_diloco", "1.0.0", exogym::modules::AsyncDiLoCoModule)
