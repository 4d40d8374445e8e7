// The Monitor's expert load from a real run: a tiny Qwen3-MoE (the shape the trainer tests build:
// hidden 48, 4 layers of which layer 1 keeps a dense MLP, 8 experts, 2 per token, the router's
// aux loss in the loss) given inline as its Hugging Face config, 2 CPU ranks at dp_shard 2
// launched on this machine from the Launch action, grabbed once it has routed a few dozen steps.
#include <QApplication>
#include <QFileInfo>
#include <iostream>

#include "ui/expert_load_view.h"
#include "ui/launch_controller.h"
#include "ui/main_window.h"
#include "ui/monitor_page.h"
#include "ui/runs_page.h"
#include "ui/screenshot_support.h"
#include "ui/screenshots.h"

namespace meshwork::ui {

namespace {

nlohmann::json tiny_qwen3_moe() {
  return {{"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"},
          {"hidden_size", 48}, {"intermediate_size", 72}, {"num_hidden_layers", 4},
          {"num_attention_heads", 6}, {"num_key_value_heads", 2}, {"head_dim", 8},
          {"vocab_size", 256}, {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0}, {"tie_word_embeddings", false}, {"num_experts", 8},
          {"num_experts_per_tok", 2}, {"moe_intermediate_size", 24}, {"norm_topk_prob", true},
          {"mlp_only_layers", {1}}, {"decoder_sparse_step", 1}, {"router_aux_loss_coef", 0.01},
          {"output_router_logits", true}};
}

}  // namespace

int render_expert_load_screenshot(const QString& dir) {
  if (!QFileInfo(LaunchController::trainer_path()).isExecutable()) {
    std::cout << "meshwork: screenshots: no meshtrain at " << LaunchController::trainer_path().toStdString()
              << ": expert-load.png skipped\n";
    return 0;
  }
  auto* app = qobject_cast<QApplication*>(QCoreApplication::instance());
  const auto window = open_window(*app, Theme::light);
  MainWindow& w = *window;
  plan_tiny_on_this_machine(
      w,
      [](RunConfig& c) {
        c.name = "tiny-qwen3-moe";
        c.model = tiny_qwen3_moe();
        c.mesh = MeshShape{1, 2, 1, 1};
        c.training.steps = 400;
        c.training.seq_len = 64;
        c.training.global_batch = 8;
        c.training.micro_batch = 2;
        c.training.warmup_steps = 5;
        c.training.lr = 1e-2;  // the router moves within the picture's steps
      },
      2);
  pump_events(800);
  qint64 run = 0;
  QString failure;
  QObject::connect(w.launcher(), &LaunchController::launched, &w, [&](qint64 id) { run = id; });
  QObject::connect(w.launcher(), &LaunchController::launch_failed, &w,
                   [&](const QString& m, const QStringList&) { failure = m; });
  w.launch_from_plan();
  wait_for([&] { return run != 0 || !failure.isEmpty(); }, 180000);
  if (run == 0) {
    std::cerr << "meshwork: screenshots: launch failed: " << failure.toStdString() << "\n";
    return 1;
  }
  MonitorPage* m = w.runs_page()->monitor();
  ExpertLoadView* view = m->expert_load_view();
  bool ok = wait_for([&] { return view->isVisible() && view->heat_map()->columns() >= 60; }, 300000);
  if (!ok) std::cerr << "meshwork: screenshots: the run's expert load never reached 60 steps\n";
  if (ok) ok &= save_grab(view, dir + "/expert-load.png", 1000);
  w.launcher()->stop(run);
  wait_for([&] { return !w.launcher()->following(run); }, 60000);
  return ok ? 0 : 1;
}

}  // namespace meshwork::ui
