#include "ui/mesh_editor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QStyle>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include "core/planner.h"
#include "core/run_config.h"
#include "ui/axis_colors.h"
#include "ui/core_bridge.h"
#include "ui/data_picker.h"
#include "ui/panel_widgets.h"
#include "ui/plan_state.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
// Which control owns a diagnostic's field: "tp", "training.seq_len", "model.num_heads", ...
std::string owner_of(const std::string& field) {
  static const std::vector<std::string> kOwners = [] {
    std::vector<std::string> o;
    for (Axis a : kAxes) o.emplace_back(axis_name(a));
    o.emplace_back(kEpName);
    for (const char* k : {"seq_len", "micro_batch", "global_batch", "precision", "activation_checkpointing", "data",
                          "name", "steps", "lr", "warmup_steps", "checkpoint_every"})
      o.emplace_back(k);
    return o;
  }();
  for (const std::string& k : kOwners)
    if (field == k || field == "mesh." + k || field == "training." + k || field == "--" + k) return k;
  if (field == "model" || field.rfind("model.", 0) == 0) return "model";
  if (field == "mesh" || field == "world_size") return "mesh";
  return "";
}

// The shortest decimal text of `v` that reads back as exactly `v`.
QString shortest_text(double v) {
  for (int digits = 1; digits < 17; ++digits) {
    const QString t = QString::number(v, 'g', digits);
    if (t.toDouble() == v) return t;
  }
  return QString::number(v, 'g', 17);
}
}  // namespace

MeshEditor::MeshEditor(PlanState* state, QWidget* parent) : QWidget(parent), state_(state) {
  setObjectName("MeshEditor");
  auto* outer = new_column_layout(this, {12, 12, 12, 12}, 12);

  // The run's basics: what the run is called and how long it trains.
  auto* run_box = new QGroupBox(tr("Run"), this);
  auto* rf = new QFormLayout(run_box);
  rf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  auto run_row = [&](const QString& label, QWidget* w, const char* field) {
    w->setObjectName(field);
    controls_[field] = w;
    auto* col = new QVBoxLayout;
    col->setSpacing(2);
    col->addWidget(w);
    col->addWidget(add_message_label(field));
    rf->addRow(label, col);
  };
  name_ = new QLineEdit(run_box);
  name_->setToolTip(tr("The run's name in Runs, Compare and the web view"));
  run_row(tr("Name"), name_, "name");
  connect(name_, &QLineEdit::editingFinished, this, [this] {
    if (name_->text().toStdString() != state_->config().name) state_->set_name(name_->text().toStdString());
  });
  steps_ = new QSpinBox(run_box);
  steps_->setRange(1, 100000000);
  steps_->setAccelerated(true);
  steps_->setKeyboardTracking(false);
  steps_->setToolTip(tr("Optimizer steps to train"));
  run_row(tr("Steps"), steps_, "steps");
  lr_ = new QLineEdit(run_box);
  lr_->setToolTip(tr("Peak learning rate, reached after the warmup (e.g. 3e-4); at most %1").arg(kMaxLearningRate));
  run_row(tr("Learning rate"), lr_, "lr");
  connect(lr_, &QLineEdit::editingFinished, this, &MeshEditor::push_lr);
  warmup_ = new QSpinBox(run_box);
  warmup_->setRange(0, 100000000);
  warmup_->setAccelerated(true);
  warmup_->setKeyboardTracking(false);
  warmup_->setSuffix(tr(" steps"));
  warmup_->setToolTip(tr("Steps of linear learning-rate warmup from 0"));
  run_row(tr("Warmup"), warmup_, "warmup_steps");
  checkpoint_every_ = new QSpinBox(run_box);
  checkpoint_every_->setRange(0, 100000000);
  checkpoint_every_->setKeyboardTracking(false);
  checkpoint_every_->setSpecialValueText(tr("none"));
  checkpoint_every_->setPrefix(tr("every "));
  checkpoint_every_->setSuffix(tr(" steps"));
  checkpoint_every_->setToolTip(tr("Save a checkpoint every N steps (a run that lost a node resumes from the last one)"));
  run_row(tr("Checkpoints"), checkpoint_every_, "checkpoint_every");
  connect(steps_, qOverload<int>(&QSpinBox::valueChanged), this, &MeshEditor::push_training);
  connect(warmup_, qOverload<int>(&QSpinBox::valueChanged), this, &MeshEditor::push_training);
  connect(checkpoint_every_, qOverload<int>(&QSpinBox::valueChanged), this, &MeshEditor::push_training);
  {
    // How the launch follows the run, as `meshwork launch --elastic --max-replans N`.
    auto* elastic_row = new QHBoxLayout;
    elastic_ = new QCheckBox(tr("Elastic"), run_box);
    elastic_->setObjectName("elastic");
    elastic_->setToolTip(tr("When a node is lost, re-plan the shape for the nodes left and resume from the last "
                            "checkpoint at once (docs/elastic.md)"));
    max_replans_ = new QSpinBox(run_box);
    max_replans_->setObjectName("max_replans");
    max_replans_->setRange(0, 100);
    max_replans_->setValue(3);
    max_replans_->setPrefix(tr("max re-plans "));
    max_replans_->setToolTip(tr("How often the run may be re-planned before it stays failed"));
    max_replans_->setEnabled(false);
    connect(elastic_, &QCheckBox::toggled, max_replans_, &QWidget::setEnabled);
    elastic_row->addWidget(elastic_);
    elastic_row->addWidget(max_replans_, 1);
    rf->addRow(tr("Lost node"), elastic_row);
  }
  outer->addWidget(run_box);

  // Model.
  auto* model_box = new QGroupBox(tr("Model"), this);
  auto* mf = new QVBoxLayout(model_box);
  model_ = new QComboBox(model_box);
  model_->setObjectName("model");
  model_->setToolTip(tr("A bundled preset, a Hugging Face config.json (Ctrl+M) or model directory (Ctrl+Shift+M)"));
  mf->addWidget(model_);
  model_info_ = new QLabel(model_box);
  model_info_->setProperty("role", "muted");
  model_info_->setWordWrap(true);
  mf->addWidget(model_info_);
  mf->addWidget(add_message_label("model"));
  controls_["model"] = model_;
  outer->addWidget(model_box);

  // Mesh axes.
  auto* mesh_box = new QGroupBox(tr("Mesh"), this);
  auto* grid = new QFormLayout(mesh_box);
  grid->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  grid->setRowWrapPolicy(QFormLayout::DontWrapRows);
  static const char* kHints[kAxisCount] = {  // kAxes order
      "Pipeline stages: the decoder layers cut into consecutive stages; micro-batches flow through them",
      "Full replicas; gradients all-reduced across them (HSDP's outer dimension)",
      "FSDP: parameters, gradients and optimizer state sharded across these ranks",
      "Context parallel: the sequence split across these ranks (ring attention)",
      "Tensor parallel: each layer's matrices split across these ranks; keep inside NVLink"};
  for (size_t i = 0; i < kAxes.size(); ++i) {
    const Axis a = kAxes[i];
    const std::string name(axis_name(a));
    auto* label = new QLabel(this);
    auto* lay = new QHBoxLayout(label);
    lay->setContentsMargins(0, 0, 0, 0);
    auto* sw = new QLabel(label);
    sw->setPixmap(color_swatch(axis_color(a, is_dark())));
    swatches_[i] = sw;
    auto* txt = new QLabel(QString::fromStdString(name), label);
    lay->addWidget(sw);
    lay->addWidget(txt);
    lay->addStretch();
    label->setMinimumWidth(100);
    axis_[i] = new QComboBox(mesh_box);
    axis_[i]->setObjectName(QString::fromStdString(name));
    axis_[i]->setToolTip(tr(kHints[i]));
    controls_[name] = axis_[i];
    auto* col = new QVBoxLayout;
    col->setSpacing(2);
    col->addWidget(axis_[i]);
    col->addWidget(add_message_label(name));
    grid->addRow(label, col);
    connect(axis_[i], qOverload<int>(&QComboBox::activated), this, [this, a, i](int) {
      state_->set_axis(a, axis_[i]->currentData().toInt());
    });
  }
  {
    // ep is not an axis of the world: it borrows ranks from dp_shard x cp x tp (core/mesh.h).
    auto* label = new QLabel(this);
    auto* lay = new QHBoxLayout(label);
    lay->setContentsMargins(0, 0, 0, 0);
    ep_swatch_ = new QLabel(label);
    ep_swatch_->setPixmap(color_swatch(expert_color(is_dark())));
    lay->addWidget(ep_swatch_);
    lay->addWidget(new QLabel(QString::fromUtf8(kEpName.data(), static_cast<int>(kEpName.size())), label));
    lay->addStretch();
    label->setMinimumWidth(100);
    ep_ = new QComboBox(mesh_box);
    ep_->setObjectName(QStringLiteral("ep"));
    ep_->setToolTip(tr("Expert parallel (mixture-of-experts models): the experts split over these ranks, borrowed "
                       "from dp_shard × cp × tp; tokens reach their experts by all-to-all"));
    controls_["ep"] = ep_;
    auto* col = new QVBoxLayout;
    col->setSpacing(2);
    col->addWidget(ep_);
    col->addWidget(add_message_label("ep"));
    grid->addRow(label, col);
    connect(ep_, qOverload<int>(&QComboBox::activated), this, [this](int) { state_->set_ep(ep_->currentData().toInt()); });
  }
  world_label_ = new QLabel(mesh_box);
  world_label_->setProperty("role", "muted");
  world_label_->setWordWrap(true);
  grid->addRow(world_label_);
  grid->addRow(add_message_label("mesh"));
  outer->addWidget(mesh_box);

  // Training.
  auto* train_box = new QGroupBox(tr("Training"), this);
  auto* tf = new QFormLayout(train_box);
  tf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  auto spin = [&](const char* name, int lo, int hi, const QString& suffix) {
    auto* s = new QSpinBox(train_box);
    s->setObjectName(name);
    s->setRange(lo, hi);
    s->setSuffix(suffix);
    s->setAccelerated(true);
    s->setKeyboardTracking(false);  // re-validate on Enter/arrow, not on every digit typed
    controls_[name] = s;
    connect(s, qOverload<int>(&QSpinBox::valueChanged), this, &MeshEditor::push_training);
    return s;
  };
  auto row = [&](const QString& label, QWidget* w, const char* field) {
    auto* col = new QVBoxLayout;
    col->setSpacing(2);
    col->addWidget(w);
    col->addWidget(add_message_label(field));
    tf->addRow(label, col);
  };
  seq_len_ = spin("seq_len", 1, 1 << 20, tr(" tokens"));
  micro_batch_ = spin("micro_batch", 1, 1 << 16, tr(" seq"));
  global_batch_ = spin("global_batch", 1, 1 << 24, tr(" seq"));
  row(tr("Sequence length"), seq_len_, "seq_len");
  row(tr("Micro batch / rank"), micro_batch_, "micro_batch");
  row(tr("Global batch"), global_batch_, "global_batch");
  precision_ = new QComboBox(train_box);
  precision_->setObjectName("precision");
  precision_->addItem("fp32", static_cast<int>(Precision::fp32));
  precision_->addItem("bf16", static_cast<int>(Precision::bf16));
  controls_["precision"] = precision_;
  row(tr("Precision"), precision_, "precision");
  checkpointing_ = new QComboBox(train_box);
  checkpointing_->setObjectName("activation_checkpointing");
  checkpointing_->addItem(tr("none"), static_cast<int>(ActivationCheckpointing::none));
  checkpointing_->addItem(tr("full (recompute layers)"), static_cast<int>(ActivationCheckpointing::full));
  controls_["activation_checkpointing"] = checkpointing_;
  row(tr("Checkpointing"), checkpointing_, "activation_checkpointing");
  connect(precision_, qOverload<int>(&QComboBox::activated), this, &MeshEditor::push_training);
  connect(checkpointing_, qOverload<int>(&QComboBox::activated), this, &MeshEditor::push_training);
  outer->addWidget(train_box);

  // Data: the bundled corpus, a prepared directory, or "Prepare data…".
  auto* data_box = new QGroupBox(tr("Data"), this);
  auto* df = new QVBoxLayout(data_box);
  data_ = new DataPicker(state_, data_box);
  df->addWidget(data_);
  df->addWidget(add_message_label("data"));
  controls_["data"] = data_->path_edit();
  outer->addWidget(data_box);

  // Combos size to a short minimum, not to their longest item, so the editor stays narrow.
  for (QComboBox* box : findChildren<QComboBox*>()) {
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(8);
  }

  other_messages_ = new QLabel(this);
  other_messages_->setProperty("role", "error");
  other_messages_->setWordWrap(true);
  other_messages_->hide();
  outer->addWidget(other_messages_);
  outer->addStretch();

  for (const std::string& p : model_presets()) model_->addItem(QString::fromStdString(p), QString::fromStdString(p));
  model_->insertSeparator(model_->count());
  model_->addItem(tr("Open config.json…"), QStringLiteral("__open__"));
  model_->addItem(tr("Open model directory…"), QStringLiteral("__open_dir__"));
  connect(model_, qOverload<int>(&QComboBox::activated), this, [this](int) {
    const QString v = model_->currentData().toString();
    if (v == QLatin1String("__open__")) {
      sync_from_state();  // put the combo back; the dialog decides
      Q_EMIT open_model_requested();
      return;
    }
    if (v == QLatin1String("__open_dir__")) {
      sync_from_state();
      Q_EMIT open_model_directory_requested();
      return;
    }
    state_->set_model(v.toStdString());
  });

  connect(state_, &PlanState::changed, this, &MeshEditor::sync_from_state);
  sync_from_state();
}

void MeshEditor::refresh_colors() {
  for (size_t i = 0; i < kAxes.size(); ++i) swatches_[i]->setPixmap(color_swatch(axis_color(kAxes[i], is_dark())));
  if (ep_swatch_) ep_swatch_->setPixmap(color_swatch(expert_color(is_dark())));
}

QLabel* MeshEditor::add_message_label(const std::string& field) {
  auto* l = new WrappedLabel(this);
  l->setObjectName(QString::fromStdString("message_" + field));
  l->setWordWrap(true);
  l->setProperty("role", "error");
  l->hide();
  messages_[field] = l;
  return l;
}

QWidget* MeshEditor::control(const std::string& field) const {
  auto it = controls_.find(field);
  return it == controls_.end() ? nullptr : it->second;
}

QString MeshEditor::message_for(const std::string& field) const {
  auto it = messages_.find(field);
  return it == messages_.end() || it->second->isHidden() ? QString() : it->second->text().remove(QChar(0x200B));
}

void MeshEditor::push_lr() {
  // The file's and the --lr flag's rule (core/run_config.h): a number in (0, kMaxLearningRate].
  const QString text = lr_->text().trimmed();
  bool ok = false;
  const double lr = text.toDouble(&ok);
  if (!ok || !(lr > 0) || lr > kMaxLearningRate) {
    lr_error_ = tr("%1: must be a number in (0, %2]").arg(text).arg(kMaxLearningRate);
    show_diagnostics();
    return;
  }
  lr_error_.clear();
  TrainingConfig t = state_->config().training;
  t.lr = lr;
  if (t == state_->config().training) show_diagnostics();
  else state_->set_training(t);
}

void MeshEditor::push_training() {
  TrainingConfig t = state_->config().training;
  t.steps = steps_->value();
  t.warmup_steps = warmup_->value();
  t.checkpoint_every = checkpoint_every_->value();
  t.seq_len = seq_len_->value();
  t.micro_batch = micro_batch_->value();
  t.global_batch = global_batch_->value();
  t.precision = static_cast<Precision>(precision_->currentData().toInt());
  t.activation_checkpointing =
      static_cast<ActivationCheckpointing>(checkpointing_->currentData().toInt());
  state_->set_training(t);
}

void MeshEditor::sync_from_state() {
  const RunConfig& c = state_->config();
  const int world = state_->cluster().world_size;
  const auto choices = axis_choices(world);
  for (size_t i = 0; i < kAxes.size(); ++i) {
    QComboBox* box = axis_[i];
    QSignalBlocker block(box);
    const int size = c.mesh.size(kAxes[i]);
    const auto resolved = state_->mesh();
    box->clear();
    const QString auto_text = size == -1 && resolved
                                  ? tr("auto (%1)").arg(resolved->shape().size(kAxes[i]))
                                  : tr("auto");
    box->addItem(auto_text, -1);
    bool present = size == -1;
    for (int d : choices) {
      box->addItem(QString::number(d), d);
      present |= d == size;
    }
    // A size loaded from a file that no longer divides the world: keep it visible so core's
    // message next to it makes sense.
    if (!present) box->addItem(tr("%1 (not a divisor of %2)").arg(size).arg(world), size);
    box->setCurrentIndex(box->findData(size));
  }
  {
    // ep: 1 and the degrees dividing the resolved dp_shard x cp x tp (and num_experts for a
    // mixture of experts; a dense model offers 1 only), plus the config's own value so core's
    // message next to it makes sense.
    QSignalBlocker block(ep_);
    ep_->clear();
    const auto resolved = state_->mesh();
    const auto model = model_of(c);
    std::vector<int> degrees = {1};
    if (resolved && model.ok() && model->is_moe()) degrees = expert_degrees(resolved->shape(), 0, *model);
    bool present = false;
    for (int d : degrees) {
      ep_->addItem(QString::number(d), d);
      present |= d == c.mesh.ep;
    }
    if (!present) ep_->addItem(QString::number(c.mesh.ep), c.mesh.ep);
    ep_->setCurrentIndex(ep_->findData(c.mesh.ep));
    ep_->setEnabled(model.ok() && model->is_moe());
  }
  {
    QSignalBlocker b1(seq_len_), b2(micro_batch_), b3(global_batch_), b4(precision_),
        b5(checkpointing_), b6(model_), b7(steps_), b8(warmup_), b9(checkpoint_every_);
    if (!name_->hasFocus() || name_->text().toStdString() == c.name) name_->setText(QString::fromStdString(c.name));
    steps_->setValue(c.training.steps);
    warmup_->setValue(c.training.warmup_steps);
    checkpoint_every_->setValue(c.training.checkpoint_every);
    // The shortest text that reads back as the same double ("0.0003", "1e-07"), unless the
    // field holds another spelling of the same value or an error the user is fixing.
    bool same = false;
    const double shown = lr_->text().trimmed().toDouble(&same);
    if (lr_error_.isEmpty() && !(same && shown == c.training.lr)) lr_->setText(shortest_text(c.training.lr));
    seq_len_->setValue(c.training.seq_len);
    micro_batch_->setValue(c.training.micro_batch);
    global_batch_->setValue(c.training.global_batch);
    precision_->setCurrentIndex(precision_->findData(static_cast<int>(c.training.precision)));
    checkpointing_->setCurrentIndex(
        checkpointing_->findData(static_cast<int>(c.training.activation_checkpointing)));
    QString model_key;
    if (c.model.is_string()) model_key = QString::fromStdString(c.model.get<std::string>());
    else model_key = QStringLiteral("__inline__");
    int idx = model_->findData(model_key);
    if (idx < 0) {
      // A config.json path or an inline config: add it above the separator.
      const QString label = model_key == QLatin1String("__inline__")
                                ? tr("inline config (%1)").arg(QString::fromStdString(c.name))
                                : QFileInfo(model_key).fileName() + " — " + QFileInfo(model_key).dir().dirName();
      model_->insertItem(0, label, model_key);
      idx = 0;
    }
    model_->setCurrentIndex(idx);
  }
  const auto& cl = state_->cluster();
  world_label_->setText(tr("World size %1 = %2 node%3 × %4 rank%5 per node")
                            .arg(world)
                            .arg(cl.num_nodes)
                            .arg(cl.num_nodes == 1 ? "" : "s")
                            .arg(cl.ranks_per_node)
                            .arg(cl.ranks_per_node == 1 ? "" : "s"));
  show_diagnostics();
}

void MeshEditor::show_diagnostics() {
  std::map<std::string, QStringList> by_owner;
  std::map<std::string, bool> has_error;
  QStringList others;
  for (const Diagnostic& d : state_->diagnostics()) {
    // core's words: "<value>: <message>" as the CLI prints them after the field.
    QString text = QString::fromStdString(d.message);
    if (!d.value.empty()) text = QString::fromStdString(d.value) + ": " + text;
    const std::string owner = owner_of(d.field);
    if (owner.empty() || !messages_.count(owner)) {
      others << QString::fromStdString(d.field) + ": " + text;
      continue;
    }
    // The field name is implicit next to its own control, except for sub-fields of the model.
    if (d.field != owner && owner == "model") text = QString::fromStdString(d.field) + ": " + text;
    by_owner[owner] << text;
    has_error[owner] = has_error[owner] || is_error(d);
  }
  if (!lr_error_.isEmpty()) {
    by_owner["lr"].prepend(lr_error_);
    has_error["lr"] = true;
  }
  for (auto& [field, label] : messages_) {
    auto it = by_owner.find(field);
    if (it == by_owner.end()) {
      label->hide();
      label->clear();
    } else {
      // Core's words may hold long runs without spaces ("micro_batch*dp_replicate*dp_shard"):
      // an invisible break after each '*' and '/' lets them wrap instead of widening the editor
      // past its column (message_for() gives the words without them).
      QString text = it->second.join("\n");
      text.replace(QLatin1Char('*'), QStringLiteral("*\u200B")).replace(QLatin1Char('/'), QStringLiteral("/\u200B"));
      label->setText(text);
      static_cast<WrappedLabel*>(label)->fit_height();
      label->setProperty("role", has_error[field] ? "error" : "warning");
      label->style()->unpolish(label);
      label->style()->polish(label);
      label->show();
    }
  }
  other_messages_->setText(others.join("\n"));
  other_messages_->setVisible(!others.isEmpty());
}

}  // namespace meshwork::ui
