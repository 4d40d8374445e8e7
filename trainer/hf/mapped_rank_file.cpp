#include "trainer/hf/mapped_rank_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>

namespace meshwork::trainer::hf {

Result<std::unique_ptr<MappedRankFile>> MappedRankFile::open(const std::filesystem::path& path) {
  std::unique_ptr<MappedRankFile> f(new MappedRankFile());
  f->path_ = path;
  const auto refuse = [&](const std::string& what) {
    return Error{"--checkpoint", path.string(), "a readable checkpoint rank file (" + what + ")"};
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return refuse(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    return refuse("empty or unreadable");
  }
  f->size_ = static_cast<size_t>(st.st_size);
  f->map_ = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file open
  if (f->map_ == MAP_FAILED) {
    f->map_ = nullptr;
    return refuse("cannot be memory-mapped");
  }
  try {
    caffe2::serialize::PyTorchStreamReader reader(path.string());
    auto [pkl, pkl_size] = reader.getRecord("data.pkl");
    size_t pos = 0;
    const char* pkl_bytes = static_cast<const char*>(pkl.get());
    auto read = [&](char* out, size_t n) {
      n = std::min(n, pkl_size - pos);
      std::memcpy(out, pkl_bytes + pos, n);
      pos += n;
      return n;
    };
    char* base = static_cast<char*>(f->map_);
    const size_t size = f->size_;
    auto record = [&](const std::string& name) {
      // The record's bytes in place: stored (uncompressed) records are contiguous in the file.
      const std::string key = "data/" + name;
      const size_t offset = reader.getRecordOffset(key), bytes = reader.getRecordSize(key);
      TORCH_CHECK(offset + bytes <= size, "record ", key, " past the end of the file");
      return at::DataPtr(base + offset, base + offset, [](void*) {}, at::Device(at::kCPU));
    };
    torch::jit::Unpickler unpickler(read, torch::jit::TypeResolver{}, torch::jit::ObjLoader{},
                                    std::function<at::DataPtr(const std::string&)>(record),
                                    std::optional<at::Device>(at::Device(at::kCPU)));
    unpickler.set_version(reader.version());
    auto dict = c10::impl::toTypedDict<std::string, at::Tensor>(unpickler.parse_ivalue().toGenericDict());
    for (size_t i = 0; dict.contains("param/" + std::to_string(i)); ++i)
      f->params_.push_back(dict.at("param/" + std::to_string(i)));
    for (const auto& entry : dict) f->tensors_.emplace(entry.key(), entry.value());
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what = what.substr(0, nl);
    return refuse(what);
  }
  return f;
}

MappedRankFile::~MappedRankFile() {
  params_.clear();
  tensors_.clear();
  if (map_) ::munmap(map_, size_);
}

void MappedRankFile::release_pages() const {
  if (map_) ::madvise(map_, size_, MADV_DONTNEED);
}

}  // namespace meshwork::trainer::hf
