// The mesh editor: the run's basics (name, steps, learning rate, warmup, checkpoints, and how the
// launch follows it: elastic or not), one control per axis
// (only divisors of the world size, or "auto"), the model picker, and the training knobs that
// change memory and speed. Edits go to PlanState; core's
// diagnostics come back and are shown under the control whose field they name, in core's words.
#pragma once

#include <QWidget>
#include <array>
#include <map>
#include <string>

#include "core/mesh.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace meshwork::ui {

class DataPicker;
class PlanState;

class MeshEditor : public QWidget {
  Q_OBJECT
 public:
  explicit MeshEditor(PlanState* state, QWidget* parent = nullptr);

  // Controls by field name, for tests and keyboard focus: "dp_replicate", "dp_shard", "cp", "tp",
  // "model", "seq_len", "micro_batch", "global_batch", "precision", "activation_checkpointing",
  // "data" (the data path's line edit), and the run's basics: "name", "steps", "lr", "warmup_steps",
  // "checkpoint_every".
  QWidget* control(const std::string& field) const;
  QComboBox* axis_combo(Axis axis) const { return axis_[axis_index(axis)]; }
  // The message shown under a control ("" when none).
  QString message_for(const std::string& field) const;
  // Re-draws the axis swatches after a theme change (the dark theme uses lighter tints).
  void refresh_colors();
  DataPicker* data_picker() const { return data_; }
  // The launch's Elastic choice (not a run config field: how the workbench follows the run, as
  // `meshwork launch --elastic --max-replans N`): a lost node re-plans and resumes at once.
  QCheckBox* elastic_box() const { return elastic_; }
  QSpinBox* max_replans_box() const { return max_replans_; }

 Q_SIGNALS:
  void open_model_requested();
  void open_model_directory_requested();  // a Hugging Face model directory (config.json + weights)

 private:
  void sync_from_state();
  void show_diagnostics();
  void push_training();
  void push_lr();  // the learning rate field, parsed; an unreadable value shows why under it
  QLabel* add_message_label(const std::string& field);

  PlanState* state_;
  std::array<QComboBox*, kAxisCount> axis_{};
  std::array<QLabel*, kAxisCount> swatches_{};
  QComboBox* ep_ = nullptr;  // expert parallel: the degrees dividing num_experts and dp_shard x cp x tp
  QLabel* ep_swatch_ = nullptr;
  QLineEdit* name_ = nullptr;
  QSpinBox* steps_ = nullptr;
  QLineEdit* lr_ = nullptr;
  QString lr_error_;  // the field's text is not a learning rate core accepts ("" when it is)
  QSpinBox* warmup_ = nullptr;
  QSpinBox* checkpoint_every_ = nullptr;
  QCheckBox* elastic_ = nullptr;
  QSpinBox* max_replans_ = nullptr;
  QComboBox* model_ = nullptr;
  QLabel* model_info_ = nullptr;
  QSpinBox* seq_len_ = nullptr;
  QSpinBox* micro_batch_ = nullptr;
  QSpinBox* global_batch_ = nullptr;
  QComboBox* precision_ = nullptr;
  QComboBox* checkpointing_ = nullptr;
  DataPicker* data_ = nullptr;
  QLabel* world_label_ = nullptr;
  QLabel* other_messages_ = nullptr;  // diagnostics no control owns
  std::map<std::string, QLabel*> messages_;
  std::map<std::string, QWidget*> controls_;
  int world_size_for_choices_ = -1;
};

}  // namespace meshwork::ui
