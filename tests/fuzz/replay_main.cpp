// Runs a fuzz target over files, the way libFuzzer replays a corpus, in the normal (gcc) build:
// every seed and every input a fuzzer once crashed on (regressions/<target>/) is a test case.
// Arguments are files or directories (read recursively). Fails when it found nothing to run,
// so a missing corpus cannot pass as a green test.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>
#include <algorithm>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

static void run_file(const fs::path& path, int& count) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replay %s (%zu bytes)\n", path.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ++count;
}

int main(int argc, char** argv) {
  int count = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    if (fs::is_directory(arg)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::recursive_directory_iterator(arg))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) run_file(f, count);
    } else if (fs::is_regular_file(arg)) {
      run_file(arg, count);
    }
  }
  std::printf("%d inputs replayed, every invariant held\n", count);
  return count > 0 ? 0 : 1;
}
