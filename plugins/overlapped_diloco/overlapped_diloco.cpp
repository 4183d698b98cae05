// Strategy "overlapped_diloco": DiLoCo whose outer step overlaps the next H
// inner steps, with the eager update (Kale et al. 2025) or the naive
// one-step delay (exogym/modules/outer/overlapped_diloco.h).
#include "exogym/modules/outer/overlapped_diloco.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("overlapped_diloco", "1.0.0", exogym::modules::OverlappedDiLoCoModule)
