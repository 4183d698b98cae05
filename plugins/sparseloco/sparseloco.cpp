// Strategy "sparseloco": SparseLoCo (Sarfi et al. 2025). DiLoCo whose
// pseudo-gradient travels as its chunk-wise top-k, quantised to 2 bits,
// with an error buffer per node in place of the outer momentum
// (exogym/modules/sparseloco.h).
#include "exogym/modules/sparseloco.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("sparseloco", "1.0.0", exogym::modules::SparseLoCoModule)
