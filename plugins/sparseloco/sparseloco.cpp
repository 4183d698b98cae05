// Strategy "sparseloco": SparseLoCo (Sarfi et al. 2025). DiLoCo whose
// pseudo-gradient travels as its chunk-wise top-k, quantised to 2 bits,
// with an error buffer per node in place of the outer momentum
// (exogym/modules/outer/sparseloco.h). The error buffers are the client's
// (the module's client state): with participation a client finds its own
// when it trains again, on whichever node.
#include "exogym/modules/outer/sparseloco.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("sparseloco", "1.0.0", exogym::modules::SparseLoCoModule)
