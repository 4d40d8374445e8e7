// `meshwork runs list | import | export | delete`: the run store from the command line.
//
//   meshwork runs list [--db PATH] [--json]
//   meshwork runs import PATH... [--db PATH] [--name NAME]
//   meshwork runs export RUN --csv OUT [--db PATH]        (OUT "-" writes to stdout)
//   meshwork runs delete RUN [--db PATH]
// Exit codes (exit_code() of the error's kind, core/error.h): 0 ok, 2 invalid input (flags,
// unknown run, missing files), 1 I/O (a file or the database cannot be read or written).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "app/commands.h"
#include "core/interop/foreign_import.h"
#include "core/cli_args.h"
#include "core/mesh_json.h"
#include "core/store/paths.h"
#include "core/store/run_segments.h"
#include "core/store/run_store.h"

namespace meshwork::cli {

namespace {

namespace fs = std::filesystem;
using store::RunId;
using store::RunStore;
using store::RunSegment;
using store::run_segments;

const char* const kUsage =
    "usage: meshwork runs list [--db PATH] [--json]\n"
    "       meshwork runs import PATH... [--db PATH] [--name NAME]\n"
    "       meshwork runs export RUN --csv OUT [--db PATH]\n"
    "       meshwork runs delete RUN [--db PATH]\n"
    "RUN is a run id or an exact run name. PATH is a metrics .jsonl file or a run directory\n"
    "(every .jsonl file below it), or another tool's run: TensorBoard event files\n"
    "(events.out.tfevents.*) or Hugging Face Trainer's trainer_state.json. The database\n"
    "defaults to $XDG_DATA_HOME/meshwork/runs.db (~/.local/share/meshwork/runs.db).\n";

const FlagSpec kDb{"--db", "PATH", ""};

fs::path db_path(const ParsedArgs& f) {
  const std::optional<std::string> db = f.value("--db");
  return db ? fs::path(*db) : store::default_db_path();
}

Result<std::unique_ptr<RunStore>> open(const ParsedArgs& f) { return RunStore::open(db_path(f)); }

std::string format_time(double unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string format_number(std::optional<double> v, int precision) {
  if (!v) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(precision) << *v;
  return out.str();
}

std::string format_rate(std::optional<double> v) {
  if (!v) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  if (*v >= 1e6) out << *v / 1e6 << "M";
  else if (*v >= 1e3) out << *v / 1e3 << "k";
  else out << std::setprecision(0) << *v;
  return out.str();
}

int list_main(const Args& args) {
  auto f = parse_args(args, {kDb, {"--json", "", ""}}, "meshwork runs list");
  if (!f) return fail(f.error());
  if (!f->positional.empty()) return fail(Error{"argument", f->positional[0], "runs list takes no arguments"});
  auto s = open(*f);
  if (!s) return fail(s.error());
  auto runs = (*s)->list_runs();
  if (!runs) return fail(runs.error());
  if (f->has("--json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : *runs) {
      nlohmann::json j = {{"id", r.id},         {"name", r.name},       {"created", r.created},
                          {"status", r.status}, {"exit_reason", r.exit_reason},
                          {"mesh", r.shape ? to_json(*r.shape) : nlohmann::json(nullptr)},   {"model", r.model},     {"world", r.world},
                          {"steps", r.steps},   {"points", r.points},   {"origin", r.origin}};
      j["final_loss"] = r.final_loss ? nlohmann::json(*r.final_loss) : nlohmann::json(nullptr);
      j["tokens_per_s"] = r.tokens_per_s ? nlohmann::json(*r.tokens_per_s) : nlohmann::json(nullptr);
      auto segments = run_segments(**s, r.id);
      if (!segments) return fail(segments.error());
      j["segments"] = nlohmann::json::array();
      for (const RunSegment& g : *segments)
        j["segments"].push_back({{"segment", g.segment}, {"from_step", g.from_step}, {"mesh", to_json(g.mesh)},
                                 {"world", g.world}, {"hosts", g.hosts}, {"cause", g.cause}, {"time", g.time}});
      out.push_back(j);
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  if (runs->empty()) {
    std::cout << "no runs in " << (*s)->path().string() << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "CREATED", "SHAPE", "MODEL", "STATUS", "STEPS", "FINAL LOSS", "TOKENS/S"}};
  for (const auto& r : *runs)
    rows.push_back({std::to_string(r.id), r.name, format_time(r.created), r.shape ? r.shape->compact() : "-",
                    r.model.empty() ? "-" : r.model, r.status,
                    r.points ? std::to_string(r.steps) : "-", format_number(r.final_loss, 4),
                    format_rate(r.tokens_per_s)});
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i)
      std::cout << std::left << std::setw(static_cast<int>(width[i]) + (i + 1 < row.size() ? 2 : 0))
                << row[i];
    std::cout << "\n";
  }
  // A re-planned run is one run; its segments, each with its shape and why it began.
  for (const auto& r : *runs) {
    auto segments = run_segments(**s, r.id);
    if (!segments) return fail(segments.error());
    if (segments->empty()) continue;
    std::cout << "\nrun " << r.id << " (" << r.name << "): " << segments->size() << " segments\n";
    for (const RunSegment& g : *segments) {
      std::string hosts;
      for (const std::string& h : g.hosts) hosts += (hosts.empty() ? "" : ",") + h;
      std::cout << "  segment " << g.segment << " from step " << g.from_step << ": " << g.mesh.compact() << " on "
                << g.world << " rank(s) (" << hosts << "): " << g.cause << "\n";
    }
  }
  return kExitOk;
}

// One run to import: a directory (every .jsonl below it) or the metrics files given together.
struct ImportSet {
  std::string origin;       // identifies the run for a later re-import (resumes, no duplicates)
  std::string default_name;
  std::vector<std::pair<fs::path, std::string>> files;  // path, source name
};

Result<std::vector<ImportSet>> collect(const std::vector<std::string>& paths) {
  std::vector<ImportSet> sets;
  ImportSet loose;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::path abs = fs::weakly_canonical(fs::absolute(p), ec);
    if (fs::is_directory(abs, ec)) {
      ImportSet set;
      set.origin = abs.string();
      set.default_name = abs.filename().string();
      set.files = interop::run_files_below(abs);  // the same files the workbench follows
      if (set.files.empty())
        return Error{"PATH", p,
                     "a run directory must contain metrics .jsonl files, TensorBoard event files "
                     "(events.out.tfevents.*) or a trainer_state.json"};
      sets.push_back(std::move(set));
    } else if (fs::is_regular_file(abs, ec)) {
      if (loose.files.empty()) {
        loose.origin = abs.string();
        loose.default_name = abs.parent_path().filename().string() + "/" + abs.stem().string();
      }
      loose.files.emplace_back(abs, abs.string());
    } else {
      return Error{"PATH", p, "no such file or directory (a metrics .jsonl file or a run directory)"};
    }
  }
  if (!loose.files.empty()) sets.push_back(std::move(loose));
  return sets;
}

int import_main(const Args& args) {
  auto f = parse_args(args, {kDb, {"--name", "NAME", ""}}, "meshwork runs import");
  if (!f) return fail(f.error());
  if (f->positional.empty()) return fail(Error{"PATH", "", "give metrics .jsonl files or run directories"});
  auto sets = collect(f->positional);
  if (!sets) return fail(sets.error());
  const std::string name = f->value("--name").value_or("");
  const bool named = f->has("--name");
  if (named && sets->size() > 1)
    return fail(Error{"--name", name, "names one run; import the directories one by one"});
  if (named && name.empty()) return fail(Error{"--name", "", "must not be empty"});
  auto s = open(*f);
  if (!s) return fail(s.error());
  RunStore& st = **s;
  for (const ImportSet& set : *sets) {
    auto existing = st.find_run_by_origin(set.origin);
    if (!existing) return fail(existing.error());
    RunId run = 0;
    if (*existing) {
      run = **existing;
      if (named)
        if (Status r = st.rename_run(run, name); !r) return fail(r.error());
    } else {
      // Runs of other tools say where they came from (their config holds the source format).
      nlohmann::json config = nlohmann::json::object();
      for (const auto& [path, source] : set.files)
        if (interop::ForeignFormat ff = interop::foreign_format(path); ff != interop::ForeignFormat::none)
          config["source_format"] = interop::to_string(ff);
      auto created = st.create_run(named ? name : set.default_name, config, nlohmann::json::object(), set.origin);
      if (!created) return fail(created.error());
      run = *created;
    }
    store::IngestCounts total;
    // All files of the run together (one transaction holds the same steps of every rank).
    std::vector<RunStore::ImportFile> files;
    for (const auto& [path, source] : set.files) {
      if (interop::foreign_format(path) == interop::ForeignFormat::none) {
        files.push_back({path, source});
        continue;
      }
      std::string warning;
      auto c = interop::import_foreign_file(st, run, path, source, warning);
      if (!c) return fail(c.error());
      total += *c;
      if (!warning.empty()) std::cerr << "meshwork: warning: " << warning << "\n";
    }
    auto counts = files.empty() ? Result<std::vector<store::IngestCounts>>(std::vector<store::IngestCounts>{})
                                : st.ingest_files(run, files);
    if (!counts) return fail(counts.error());
    for (size_t i = 0; i < files.size(); ++i) {
      const fs::path& path = files[i].path;
      const store::IngestCounts* c = &(*counts)[i];
      total += *c;
      if (c->malformed || c->unknown)
        std::cerr << "meshwork: warning: " << path.string() << ": " << c->malformed
                  << " malformed and " << c->unknown
                  << " unknown lines counted, not stored (`runs list` keeps the run; the first "
                     "ones are in the run's events)\n";
    }
    // Without --name, a new run takes the name from its run config when the trainer wrote one.
    auto info = st.get_run(run);
    if (!info) return fail(info.error());
    // Another tool's run has no start or end records: once imported, it is a finished run.
    if (info->config.contains("source_format") && info->summary.status == store::kStatusCreated) {
      if (Status r = st.set_status(run, store::kStatusOk); !r) return fail(r.error());
      info->summary.status = store::kStatusOk;
    }
    if (!named && !*existing)
      if (auto n = info->config.find("name"); n != info->config.end() && n->is_string() &&
                                              !n->get<std::string>().empty()) {
        (void)st.rename_run(run, n->get<std::string>());
        info->summary.name = n->get<std::string>();
      }
    std::cout << (*existing ? "updated" : "imported") << " run " << run << " '"
              << info->summary.name << "' from " << set.files.size() << " file"
              << (set.files.size() == 1 ? "" : "s") << ": " << total.lines << " lines, "
              << total.points << " new points, " << total.duplicates << " already stored, "
              << total.malformed << " malformed, " << total.unknown << " unknown; status "
              << info->summary.status << "\n";
  }
  return kExitOk;
}

Result<RunId> resolve_one(RunStore& st, const ParsedArgs& f, const char* verb) {
  if (f.positional.size() != 1)
    return Error{"RUN", f.positional.empty() ? "" : f.positional[1],
                 std::string("runs ") + verb + " takes exactly one run id or name"};
  return st.resolve_run(f.positional[0]);
}

int export_main(const Args& args) {
  auto f = parse_args(args, {kDb, {"--csv", "OUT", ""}}, "meshwork runs export");
  if (!f) return fail(f.error());
  const std::optional<std::string> csv = f->value("--csv");
  if (!csv) return fail(Error{"--csv", "", "give the CSV file to write (or - for stdout)"});
  auto s = open(*f);
  if (!s) return fail(s.error());
  auto run = resolve_one(**s, *f, "export");
  if (!run) return fail(run.error());
  const std::string out = *csv;
  Status st = out == "-" ? (*s)->export_csv(*run, std::cout) : (*s)->export_csv(*run, fs::path(out));
  if (!st) return fail(st.error());
  if (out != "-") std::cout << "wrote run " << *run << " to " << out << "\n";
  return kExitOk;
}

int delete_main(const Args& args) {
  auto f = parse_args(args, {kDb}, "meshwork runs delete");
  if (!f) return fail(f.error());
  auto s = open(*f);
  if (!s) return fail(s.error());
  auto run = resolve_one(**s, *f, "delete");
  if (!run) return fail(run.error());
  auto info = (*s)->get_run(*run);
  if (!info) return fail(info.error());
  if (Status st = (*s)->delete_run(*run); !st) return fail(st.error());
  std::cout << "deleted run " << *run << " '" << info->summary.name << "' ("
            << info->summary.points << " points)\n";
  return kExitOk;
}

}  // namespace

int runs_main(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    (args.empty() ? std::cerr : std::cout) << kUsage;
    return args.empty() ? kExitInvalid : kExitOk;
  }
  const std::string sub = args[0];
  const Args rest(args.begin() + 1, args.end());
  if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
      std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (sub == "list") return list_main(rest);
  if (sub == "import") return import_main(rest);
  if (sub == "export") return export_main(rest);
  if (sub == "delete") return delete_main(rest);
  return fail(Error{"runs", sub, "allowed: list, import, export, delete"});
}

}  // namespace meshwork::cli
