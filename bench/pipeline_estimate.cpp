// Core's view of one pipelined run, for bench/pipeline.sh: per stage, the memory estimate
// (estimate_memory_stages; CPU: fused attention as LibTorch runs it, reserve 0), and the bubble
// the schedule leaves: the closed form (core/pipeline.h, balanced chunks) and the simulated
// timeline of this rank's lists with the cut's own chunk costs (core/pipeline_schedule.h).
//
// pipeline_estimate RUN_CONFIG.json   (the config a run's start record carries)
// prints {"micro_batches", "bubble_closed_form", "bubble_simulated", "stages": [{"stage",
// "memory_bytes", "layers"}]}.
#include <fstream>
#include <iostream>

#include "core/memory_estimate.h"
#include "core/model_spec.h"
#include "core/parallel_layout.h"
#include "core/pipeline.h"
#include "core/pipeline_schedule.h"
#include "core/run_config.h"

using namespace meshwork;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: pipeline_estimate RUN_CONFIG.json\n";
    return 2;
  }
  auto config = load_run_config(argv[1]);
  if (!config.ok()) {
    std::cerr << "pipeline_estimate: " << config.error().message() << "\n";
    return 2;
  }
  auto spec = model_spec_from_run_model(config->model);
  if (!spec.ok()) {
    std::cerr << "pipeline_estimate: " << spec.error().message() << "\n";
    return 2;
  }
  const LayoutCheck checked = ParallelLayout::check(*config, &*spec, Placement::of(*config));
  if (!checked.ok()) {
    for (const std::string& e : checked.error_texts()) std::cerr << "pipeline_estimate: " << e << "\n";
    return 2;
  }
  const ParallelLayout& layout = *checked.layout;
  const TrainingConfig& t = config->training;
  const int pp = layout.size(Axis::pp), v = t.pp_virtual_stages;
  const int64_t m = layout.grad_accum_steps();

  MemoryModel knobs;
  knobs.attention = AttentionKernel::fused;  // as bench/shapes_estimate.cpp
  knobs.reserve_bytes = 0;
  MemoryQuery mq = layout.memory_query(*spec, knobs);
  mq.training.device = DeviceKind::cpu;  // the runs it is checked against are CPU runs
  const auto chunks = pipeline_cut(*spec, t.seq_len, pp, v);
  nlohmann::json stages = nlohmann::json::array();
  for (const MemoryBreakdown& b : estimate_memory_stages(mq)) {
    int layers = 0;
    for (const PipelineChunk& c : chunks)
      if (c.rank == b.pp_stage) layers += c.num_layers;
    stages.push_back({{"stage", b.pp_stage}, {"memory_bytes", b.total()}, {"layers", layers}});
  }
  // One micro-batch's forward and backward per chunk in the cut's cost unit (backward = 2 x
  // forward, as the time estimate's FLOP count has it).
  std::vector<double> fwd, bwd;
  for (const PipelineChunk& c : chunks) {
    fwd.push_back(c.cost / 3);
    bwd.push_back(2 * c.cost / 3);
  }
  auto timeline = simulate_pipeline(t.pp_schedule, pp, v, m, fwd, bwd);
  if (!timeline.ok()) {
    std::cerr << "pipeline_estimate: " << timeline.error().message() << "\n";
    return 2;
  }
  nlohmann::json out = {{"micro_batches", m},
                        {"bubble_closed_form", pipeline_bubble_fraction(t.pp_schedule, pp, v, m)},
                        {"bubble_simulated", timeline->bubble_fraction},
                        {"stages", stages}};
  std::cout << out.dump(1) << "\n";
  return 0;
}
