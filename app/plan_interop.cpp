#include "app/plan_interop.h"

#include <fstream>
#include <iostream>

#include "app/commands.h"

namespace meshwork::cli {

Result<interop::ImportedConfig> read_plan_source(const std::string& path) {
  auto imported = interop::import_config(path);
  if (!imported.ok()) return imported.error();
  std::cerr << "meshwork: read " << to_string(imported->format) << " config " << path << "\n";
  if (!imported->unknown_keys.empty()) {
    std::cerr << "  not used by Meshwork:";
    for (const std::string& k : imported->unknown_keys) std::cerr << " " << k;
    std::cerr << "\n";
  }
  for (const std::string& n : imported->notes) std::cerr << "  note: " << n << "\n";
  return imported;
}

int export_plan(const PlanQuery& q, const Plan& plan, const PlanExportOptions& options) {
  interop::ExportRequest request;
  request.config.model = options.model;
  request.config.training = options.training;
  TrainingConfig& t = request.config.training;
  t.seq_len = q.training.seq_len;
  t.micro_batch = q.training.micro_batch;
  t.precision = q.training.precision;
  t.activation_checkpointing = q.training.activation_checkpointing;
  t.device = q.training.device;
  request.num_machines = q.nodes;
  request.processes_per_machine = q.gpus_per_node;
  if (options.out) request.config_file = *options.out;  // the launch lines name the file written
  std::optional<Error> first_refusal;
  int skipped = 0;
  for (size_t i = 0; i < plan.shapes.size(); ++i) {
    const PlanEntry& e = plan.shapes[i];
    if (!e.fits) break;  // fitting shapes come first
    request.config.mesh = e.shape;
    // Without --global-batch the planner gives each shape micro_batch x dp (no accumulation).
    t.global_batch = q.training.global_batch > 0 ? q.training.global_batch
                                                 : q.training.micro_batch * e.shape.group_size(GroupKind::dp);
    auto exported = interop::export_config(request, options.format);
    if (!exported.ok()) {
      if (!first_refusal) first_refusal = exported.error();
      ++skipped;
      continue;
    }
    std::ostream* text_out = &std::cout;
    std::ofstream file;
    if (options.out) {
      file.open(*options.out, std::ios::binary | std::ios::trunc);
      if (!file) return fail(Error{"--out", *options.out, "a file that can be written"}.as(ErrorKind::io));
      text_out = &file;
    }
    *text_out << exported->text;
    text_out->flush();
    if (options.out && !file) return fail(Error{"--out", *options.out, "a file that can be written"}.as(ErrorKind::io));
    std::ostream& info = options.out ? std::cout : std::cerr;
    if (options.out) info << "wrote " << *options.out << " (" << to_string(options.format) << ")\n";
    info << "shape #" << (i + 1) << ": " << e.shape.to_string();
    if (skipped > 0)
      info << " (the " << skipped << " better shape(s) before it: " << first_refusal->message() << ")";
    info << "\n";
    for (const std::string& n : exported->notes) info << "note: " << n << "\n";
    info << "launch, one line per node:\n";
    for (const std::string& line : exported->launch_commands) info << "  " << line << "\n";
    return kExitOk;
  }
  if (first_refusal) return fail(*first_refusal);
  return fail(Error{"--export", std::string(to_string(options.format)), "needs a shape that fits; none does"}.as(ErrorKind::does_not_fit));
}

}  // namespace meshwork::cli
