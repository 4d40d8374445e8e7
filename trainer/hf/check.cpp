#include "trainer/hf/check.h"

#include "trainer/hf/checkpoint_loader.h"
#include "trainer/model.h"

namespace meshwork::trainer::hf {

Result<std::string> check_hf_weights(const RunConfig& run, const ModelSpec& spec) {
  const auto dir = hf_weights_dir(run.model);
  const WeightInit init = run.training.init;
  if (init == WeightInit::random || (init == WeightInit::auto_ && !dir)) return std::string();
  if (!dir)
    return Error{"--init", "hf",
                 "--model naming a Hugging Face directory holding model.safetensors or "
                 "model.safetensors.index.json (or --init random)"};
  // The model's parameter list (names and full shapes) is all the check needs: building the
  // layouts allocates no tensor.
  const Model model(spec);
  std::vector<std::vector<ParamShape>> units;
  for (int u = 0; u < model.num_units(); ++u) {
    units.emplace_back();
    for (const ParamInfo& p : model.full_layout(u).params) units.back().push_back({p.name, p.shape});
  }
  // open() maps the files and parses their headers; no tensor's pages are touched.
  auto ck = HfCheckpoint::open(*dir, spec, units);
  if (!ck.ok()) return ck.error();
  size_t tensors = 0;
  for (const auto& u : units) tensors += u.size();
  return "checkpoint " + dir->string() + ": " + std::to_string(tensors) + " tensors match config.json (" +
         std::to_string((*ck)->model_bytes()) + " bytes, not read)";
}

}  // namespace meshwork::trainer::hf
