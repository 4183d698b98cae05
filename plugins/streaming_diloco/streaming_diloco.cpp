// Strategy "streaming_diloco": Streaming DiLoCo (Douillard et al. 2025). The
// parameters are cut into fragments that each sync as DiLoCo does every H
// inner steps, on staggered steps, optionally overlapped with tau inner
// steps, mixed in with alpha and sent in a low-bit format
// (exogym/modules/outer/streaming_diloco.h).
#include "exogym/modules/outer/streaming_diloco.h"

EXOGYM_MODULE_STRATEGY_PLUGIN("streaming_diloco", "1.0.0", exogym::modules::StreamingDiLoCoModule)
