// Placeholder until issue 3 lands: proves LibTorch links.
#include <iostream>
#include <torch/version.h>
int main() { std::cerr << "meshtrain: not built yet (LibTorch " << TORCH_VERSION << ")\n"; return 1; }
