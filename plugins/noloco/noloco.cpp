// Strategy "noloco": NoLoCo (Kolehmainen et al., 2025). Each node takes H
// inner optimizer steps on its own data; then it exchanges its slow weights
// and outer gradient with one random partner (no all-reduce) and takes the
// modified Nesterov outer step (exogym/modules/outer/noloco.h).
#include "exogym/modules/outer/noloco.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("noloco", "1.0.0", exogym::modules::NoLoCoModule)
