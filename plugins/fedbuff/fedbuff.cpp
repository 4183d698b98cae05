// Strategy "fedbuff": buffered asynchronous aggregation (Nguyen et al.
// 2022). Nodes send their models when their rounds end; the server applies
// every `buffer` updates at once, weighting stale ones down.
#include "exogym/modules/async/fedbuff.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("fedbuff", "1.0.0", exogym::modules::FedBuffModule)
