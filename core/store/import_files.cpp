// RunStore::ingest_files: `runs import` of one or many metrics files of a run (see run_store.h).
#include <algorithm>
#include <fstream>
#include <system_error>

#include "core/store/ingester.h"
#include "core/store/run_store.h"
#include "core/store/sqlite.h"

namespace meshwork::store {

Result<std::vector<IngestCounts>> RunStore::ingest_files(RunId run, const std::vector<ImportFile>& files,
                                                         size_t chunk_bytes) {
  if (!ingester_) return Error{"store", path_.string(), "is open read-only"}.as(ErrorKind::io);
  struct Open {
    std::ifstream in;
    std::string source;
    uint64_t offset = 0;
    size_t want = 0;  // bytes to read next (doubled while one line is longer)
    bool done = false;
  };
  // Each file gets its share of a transaction's bytes per round (at least 4 KiB).
  const size_t share = std::max<size_t>(4096, std::max<size_t>(chunk_bytes, 4096) / std::max<size_t>(1, files.size()));
  std::vector<Open> open(files.size());
  std::vector<IngestCounts> counts(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    const std::filesystem::path& path = files[i].path;
    Open& f = open[i];
    f.source = files[i].source.empty() ? path.string() : files[i].source;
    f.in.open(path, std::ios::binary);
    if (!f.in)
      return Error{"PATH", path.string(), "cannot be read (a metrics .jsonl file or a run directory)"}.as(ErrorKind::io);
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    Result<uint64_t> start = source_offset(run, f.source);
    if (!start) return start.error();
    if (!ec && size < *start)
      return Error{"PATH", path.string(),
                   "is shorter than the " + std::to_string(*start) +
                       " bytes already imported from it; import it as a new run (--name)"};
    f.offset = counts[i].offset = *start;
    f.want = share;
  }
  std::string buf;
  for (bool left = !files.empty(); left;) {
    sql::Transaction tx(db_);
    if (!tx.begun()) return tx.begun().error();
    left = false;
    for (size_t i = 0; i < files.size(); ++i) {
      Open& f = open[i];
      if (f.done) continue;
      f.in.seekg(static_cast<std::streamoff>(f.offset));
      buf.resize(f.want);
      f.in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.resize(static_cast<size_t>(f.in.gcount()));
      const bool at_eof = buf.size() < f.want;
      f.in.clear();
      if (buf.empty()) {
        f.done = true;
        continue;
      }
      Result<IngestCounts> r = ingester_->ingest(run, f.source, f.offset, buf, at_eof);
      if (!r) {
        ingester_->forget();
        return r.error();
      }
      counts[i] += *r;
      if (r->offset == f.offset && !at_eof) {
        f.want *= 2;  // one line longer than a chunk: read more at once
      } else {
        f.offset = r->offset;
        f.want = share;
        f.done = at_eof;
      }
      left = left || !f.done;
    }
    // The import is complete: its ranks' open chart buckets are too (same transaction).
    if (!left) ingester_->flush_open(run);
    if (Status s = ingester_->finish_and_commit(tx); !s) return s.error();
  }
  return counts;
}

}  // namespace meshwork::store
