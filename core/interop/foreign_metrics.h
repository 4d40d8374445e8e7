// Runs trained by other tools, as points Meshwork stores: the series names of Hugging Face
// Trainer, Accelerate's and torchtitan's TensorBoard trackers mapped onto Meshwork's metric keys
// where they mean the same thing (docs/metrics.md), kept under their own names otherwise; and
// Hugging Face Trainer's trainer_state.json read into the same points as event files give.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/interop/tfevents.h"

namespace meshwork::interop {

struct MetricName {
  std::string key;     // Meshwork's key ("loss", "lr", ...) or the tool's own name
  double scale = 1;    // multiply the tool's value by this (percent -> fraction, GiB -> bytes)
  bool mapped = false; // key is one of Meshwork's
};
// "train/loss", "loss_metrics/global_avg_loss", "Loss/train" -> loss; "learning_rate" -> lr;
// "tps" / "throughput" -> tokens_per_s; "mfu(%)" -> mfu / 100; "memory/max_active(GiB)" ->
// mem_peak_bytes x 2^30; "eval/loss", "eval_loss" -> eval_loss; others unchanged.
MetricName meshwork_metric_name(std::string_view tool_name);

// trainer_state.json's log_history: one point per numeric entry of each record, at the record's
// "step" (records without one are skipped; "epoch" becomes a series of its own). The file has
// no times: wall_time is 0 (absent). Errors name the file and the entry.
Result<std::vector<ScalarPoint>> read_trainer_state(std::string_view text, std::string_view name);

}  // namespace meshwork::interop
