#include "core/interop/foreign_import.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "core/interop/foreign_metrics.h"
#include "core/interop/tfevents.h"

namespace meshwork::interop {

namespace fs = std::filesystem;

ForeignFormat foreign_format(const fs::path& path) {
  const std::string name = path.filename().string();
  if (name.rfind("events.out.tfevents.", 0) == 0) return ForeignFormat::tfevents;
  if (name == "trainer_state.json") return ForeignFormat::trainer_state;
  return ForeignFormat::none;
}

std::string_view to_string(ForeignFormat f) {
  switch (f) {
    case ForeignFormat::tfevents: return "tensorboard";
    case ForeignFormat::trainer_state: return "trainer_state";
    case ForeignFormat::none: break;
  }
  return "meshtrain";
}

namespace {

Result<std::string> read_from(const fs::path& path, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path.string(), "", "cannot be read"}.as(ErrorKind::io);
  in.seekg(static_cast<std::streamoff>(offset));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Points of one step under Meshwork's names (scaled), the step's time the latest of its points'.
std::vector<store::ForeignStep> by_step(const std::vector<ScalarPoint>& points) {
  std::map<int64_t, store::ForeignStep> steps;
  for (const ScalarPoint& p : points) {
    store::ForeignStep& s = steps[p.step];
    s.step = p.step;
    s.time = std::max(s.time, p.wall_time);
    const MetricName name = meshwork_metric_name(p.tag);
    bool replaced = false;  // a tag logged twice at one step: the last value, as TensorBoard shows
    for (auto& [key, value] : s.values)
      if (key == name.key) {
        value = p.value * name.scale;
        replaced = true;
      }
    if (!replaced) s.values.emplace_back(name.key, p.value * name.scale);
  }
  std::vector<store::ForeignStep> out;
  out.reserve(steps.size());
  for (auto& [step, s] : steps) out.push_back(std::move(s));
  return out;
}

}  // namespace

Result<store::IngestCounts> import_foreign_file(store::RunStore& st, store::RunId run, const fs::path& path,
                                                const std::string& source, std::string& warning) {
  const ForeignFormat format = foreign_format(path);
  if (format == ForeignFormat::trainer_state) {
    // Trainer rewrites the whole file at each save: read it again only when its size changed
    // (a follower polls it; its points are stored once either way).
    auto stored = st.source_offset(run, source);
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (stored && !ec && *stored == size && size > 0) return store::IngestCounts{};
    auto text = read_from(path, 0);
    if (!text) return text.error();
    auto points = read_trainer_state(*text, path.string());
    if (!points) return points.error();
    return st.ingest_foreign(run, source, text->size(), by_step(*points));
  }
  auto offset = st.source_offset(run, source);
  if (!offset) return offset.error();
  auto bytes = read_from(path, *offset);
  if (!bytes) return bytes.error();
  const EventRead r = read_event_records(*bytes, *offset, path.string());
  if (r.corrupt) warning = r.corrupt->message();
  else if (r.cut) warning = r.cut_error(path.string()).message() + "; the next import reads on from there";
  return st.ingest_foreign(run, source, r.intact_end, by_step(r.scalars));
}

std::vector<std::pair<fs::path, std::string>> run_files_below(const fs::path& dir) {
  std::vector<std::pair<fs::path, std::string>> files;
  std::error_code ec;
  // A file may vanish between listing and reading (a tracker rotating it): skip, never throw.
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fe;
    if (!it->is_regular_file(fe)) continue;
    const fs::path& p = it->path();
    if (p.extension() == ".jsonl" || foreign_format(p) != ForeignFormat::none)
      files.emplace_back(p, fs::relative(p, dir, fe).string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

Result<store::IngestCounts> import_run_directory(store::RunStore& st, store::RunId run, const fs::path& dir,
                                                 std::vector<std::string>& warnings) {
  store::IngestCounts total;
  for (const auto& [path, source] : run_files_below(dir)) {
    if (foreign_format(path) != ForeignFormat::none) {
      std::string warning;
      auto c = import_foreign_file(st, run, path, source, warning);
      if (!c) return c.error();
      total += *c;
      if (!warning.empty()) warnings.push_back(std::move(warning));
      continue;
    }
    auto offset = st.source_offset(run, source);
    if (!offset) return offset.error();
    auto bytes = read_from(path, *offset);
    if (!bytes) return bytes.error();
    if (bytes->empty()) continue;
    // ingest_chunk keeps a trailing partial line for the next pass: the writer may be in it.
    auto c = st.ingest_chunk(run, source, *offset, *bytes);
    if (!c) return c.error();
    total += *c;
  }
  return total;
}

}  // namespace meshwork::interop
