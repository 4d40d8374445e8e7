// Declaration shim (see ../README.md).
#pragma once
#include "gloo/context.h"
