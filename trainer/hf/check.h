// `meshtrain --check` with a Hugging Face model directory: the checkpoint's headers against
// config.json, before any rank starts and without reading a tensor's data.
#pragma once

#include <string>

#include "core/error.h"
#include "core/model_spec.h"
#include "core/run_config.h"

namespace meshwork::trainer::hf {

// When `run` starts from Hugging Face weights (--init hf, or auto with a directory holding
// them), opens every safetensors header (model.safetensors or the index and its shards) and
// checks each tensor the model needs: present, with config.json's shape and a convertible dtype
// (HfCheckpoint::open, the same check a run makes). Ok with a one-line summary ("" when the run
// reads no checkpoint); otherwise the first mismatch, naming file and tensor.
Result<std::string> check_hf_weights(const RunConfig& run, const ModelSpec& spec);

}  // namespace meshwork::trainer::hf
