// Precompiled header for the LibTorch translation units (see cmake/MeshworkTorch.cmake).
#pragma once
#include <torch/torch.h>
