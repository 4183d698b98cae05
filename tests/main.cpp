#define CATCH_CONFIG_MAIN
#include "testing.h"
