#include "ui/described_cluster_panel.h"

#include <algorithm>

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>

#include "core/gpu_kinds.h"
#include "ui/cluster_model.h"

namespace meshwork::ui {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr const char* kSettingsKey = "clusters/described";
const QString kCustom = QStringLiteral("custom");

QDoubleSpinBox* figure(QWidget* parent, double max, const QString& suffix, const QString& name) {
  auto* box = new QDoubleSpinBox(parent);
  box->setObjectName(name);
  box->setRange(0.1, max);
  box->setDecimals(1);
  box->setSuffix(suffix);
  return box;
}
}  // namespace

DescribedClusterPanel::DescribedClusterPanel(ClusterModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  setObjectName("DescribedClusterPanel");
  // The header (the toggle and the saved list) sits on the Cluster heading's line
  // (ClusterPanel::add_section); this widget is the form, shown on demand and by itself while a
  // described cluster is planned.
  header_ = new QWidget(this);
  header_->setObjectName("DescribedHeader");
  auto* top = new QHBoxLayout(header_);
  top->setContentsMargins(0, 0, 0, 0);
  toggle_ = new QToolButton(header_);
  toggle_->setObjectName("DescribedToggle");
  toggle_->setCheckable(true);
  toggle_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  toggle_->setAutoRaise(true);
  toggle_->setText(tr("Hypothetical cluster"));
  toggle_->setToolTip(tr("Plan for GPUs you do not have open yet: describe the nodes by their hardware. Nothing is "
                         "reached; the plan, the estimates and File › Export work as for a real cluster."));
  top->addWidget(toggle_);
  saved_combo_ = new QComboBox(header_);
  saved_combo_->setObjectName("DescribedSaved");
  saved_combo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  saved_combo_->setMinimumContentsLength(12);
  saved_combo_->setToolTip(tr("The saved hypothetical clusters"));
  top->addWidget(saved_combo_);
  delete_ = new QPushButton(tr("Forget"), header_);
  delete_->setToolTip(tr("Remove the chosen cluster from the saved list"));
  top->addWidget(delete_);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 4);
  lay->setSpacing(4);

  body_ = new QWidget(this);
  auto* body = new QVBoxLayout(body_);
  body->setContentsMargins(0, 0, 0, 0);
  body->setSpacing(4);
  name_ = new QLineEdit(body_);
  name_->setObjectName("DescribedName");
  name_->setPlaceholderText(tr("name, e.g. pod"));
  nodes_ = new QSpinBox(body_);
  nodes_->setObjectName("DescribedNodes");
  nodes_->setRange(1, 100000);
  nodes_->setValue(64);
  gpus_ = new QSpinBox(body_);
  gpus_->setObjectName("DescribedGpus");
  gpus_->setRange(1, 64);
  gpus_->setValue(8);
  kind_ = new QComboBox(body_);
  kind_->setObjectName("DescribedKind");
  for (const GpuKind& k : gpu_kinds()) kind_->addItem(QString::fromStdString(k.name), QString::fromStdString(k.id));
  kind_->addItem(tr("Custom: memory, links and peak TFLOPS below"), kCustom);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Name"), body_));
  row->addWidget(name_, 1);
  row->addWidget(new QLabel(tr("Nodes"), body_));
  row->addWidget(nodes_);
  row->addWidget(new QLabel(tr("× GPUs"), body_));
  row->addWidget(gpus_);
  row->addWidget(kind_, 2);
  body->addLayout(row);
  memory_gib_ = figure(body_, 4096, tr(" GiB"), QStringLiteral("DescribedMemory"));
  bf16_ = figure(body_, 100000, tr(" TFLOPS bf16"), QStringLiteral("DescribedBf16"));
  fp32_ = figure(body_, 100000, tr(" TFLOPS fp32"), QStringLiteral("DescribedFp32"));
  intra_ = figure(body_, 100000, tr(" GB/s in node"), QStringLiteral("DescribedIntra"));
  inter_ = figure(body_, 100000, tr(" GB/s between nodes"), QStringLiteral("DescribedInter"));
  intra_->setToolTip(tr("Per GPU and direction within a node (NVLink 4: 450 GB/s; PCIe Gen4 x16: 32 GB/s)"));
  inter_->setToolTip(tr("Per GPU between nodes: its NIC (400 Gb/s InfiniBand = 50 GB/s)"));
  auto* figures = new QHBoxLayout;
  figures->addWidget(new QLabel(tr("Per GPU"), body_));
  for (QDoubleSpinBox* b : {memory_gib_, bf16_, fp32_, intra_, inter_}) figures->addWidget(b, 1);
  body->addLayout(figures);
  auto* buttons = new QHBoxLayout;
  plan_ = new QPushButton(tr("Plan for this cluster"), body_);
  plan_->setObjectName("DescribedPlan");
  plan_->setToolTip(tr("Plan on these nodes in place of the SSH nodes, and keep the cluster in the saved list"));
  back_ = new QPushButton(tr("Back to the SSH nodes"), body_);
  back_->setObjectName("DescribedBack");
  state_ = new QLabel(body_);
  state_->setObjectName("DescribedState");
  state_->setProperty("role", "muted");
  state_->setWordWrap(true);
  buttons->addWidget(plan_);
  buttons->addWidget(back_);
  buttons->addWidget(state_, 1);
  body->addLayout(buttons);
  lay->addWidget(body_);
  connect(toggle_, &QToolButton::toggled, this, [this](bool open) {
    setVisible(open);
    toggle_->setArrowType(open ? Qt::DownArrow : Qt::RightArrow);
  });
  toggle_->setArrowType(Qt::RightArrow);
  hide();

  connect(kind_, &QComboBox::currentIndexChanged, this, [this] { fill_from_kind(); });
  connect(plan_, &QPushButton::clicked, this, &DescribedClusterPanel::plan_for_it);
  connect(back_, &QPushButton::clicked, this, &DescribedClusterPanel::back_to_nodes);
  connect(delete_, &QPushButton::clicked, this, &DescribedClusterPanel::delete_saved);
  connect(saved_combo_, &QComboBox::activated, this, [this](int i) {
    if (i > 0) use_saved(saved_combo_->itemText(i));
  });
  connect(model_, &ClusterModel::cluster_changed, this, &DescribedClusterPanel::update_state);
  fill_from_kind();
  load_saved();
  update_state();
}

void DescribedClusterPanel::set_name(const QString& name) { name_->setText(name); }
void DescribedClusterPanel::set_nodes(int nodes) { nodes_->setValue(nodes); }
void DescribedClusterPanel::set_gpus_per_node(int gpus) { gpus_->setValue(gpus); }

bool DescribedClusterPanel::set_kind(const QString& id) {
  const int i = kind_->findData(id.toLower());
  if (i < 0) return false;
  kind_->setCurrentIndex(i);
  fill_from_kind();
  return true;
}

void DescribedClusterPanel::set_custom(double memory_gib, double bf16_tflops, double fp32_tflops, double intra_gb_s,
                                       double inter_gb_s) {
  set_kind(kCustom);
  memory_gib_->setValue(memory_gib);
  bf16_->setValue(bf16_tflops);
  fp32_->setValue(fp32_tflops);
  intra_->setValue(intra_gb_s);
  inter_->setValue(inter_gb_s);
}

void DescribedClusterPanel::fill_from_kind() {
  const QString id = kind_->currentData().toString();
  const bool custom = id == kCustom;
  for (QDoubleSpinBox* b : {memory_gib_, bf16_, fp32_, intra_, inter_}) b->setEnabled(custom);
  if (custom) return;  // the figures stay as they were, to be edited
  auto kind = find_gpu_kind(id.toStdString());
  if (!kind) return;
  memory_gib_->setValue(kind->memory_bytes / kGiB);
  bf16_->setValue(kind->peak_flops_bf16 / 1e12);
  fp32_->setValue(kind->peak_flops_fp32 / 1e12);
  intra_->setValue(kind->intra_node_bytes_per_s / 1e9);
  inter_->setValue(kind->inter_node_bytes_per_s / 1e9);
}

DescribedClusterSource DescribedClusterPanel::source() const {
  const QString id = kind_->currentData().toString();
  DescribedClusterSource d;
  if (id != kCustom) {
    if (auto kind = find_gpu_kind(id.toStdString())) d = describe_cluster(*kind, nodes_->value(), gpus_->value());
  } else {
    // The spin boxes round to their decimals: the figures are what they show.
    d.gpu = kCustom.toStdString();
    d.nodes = nodes_->value();
    d.gpus_per_node = gpus_->value();
    d.gpu_memory_bytes = memory_gib_->value() * kGiB;
    d.peak_flops_bf16 = bf16_->value() * 1e12;
    d.peak_flops_fp32 = fp32_->value() * 1e12;
    d.intra_node_bytes_per_s = intra_->value() * 1e9;
    d.inter_node_bytes_per_s = inter_->value() * 1e9;
  }
  d.name = name_->text().trimmed().toStdString();
  return d;
}

QString DescribedClusterPanel::label_of(const DescribedClusterSource& s) {
  QString gpu = QString::fromStdString(s.gpu);
  if (auto kind = find_gpu_kind(s.gpu)) gpu = QString::fromStdString(kind->name);
  const QString shape = QStringLiteral("%1 × %2 %3").arg(s.nodes).arg(s.gpus_per_node).arg(gpu);
  return s.name.empty() ? shape : QStringLiteral("%1 (%2)").arg(QString::fromStdString(s.name), shape);
}

void DescribedClusterPanel::plan_for_it() {
  const DescribedClusterSource d = source();
  if (!model_->is_described()) {
    nodes_before_ = model_->to_node_configs();
    source_before_ = model_->source();
  }
  QString gpu = QStringLiteral("custom GPU, %1 GiB").arg(d.gpu_memory_bytes / kGiB, 0, 'f', 0);
  if (auto kind = find_gpu_kind(d.gpu)) gpu = QString::fromStdString(kind->name);
  // Saved first: the list then shows it as the one in use.
  const QString label = label_of(d);
  saved_.erase(std::remove_if(saved_.begin(), saved_.end(), [&](const auto& s) { return label_of(s) == label; }),
               saved_.end());
  saved_.insert(saved_.begin(), d);
  store_saved();
  load_saved();
  model_->show_described(d, gpu);
}

void DescribedClusterPanel::back_to_nodes() {
  if (!model_->is_described()) return;
  model_->show_nodes(nodes_before_, is_described(source_before_) ? ClusterSource(SshNodesSource{}) : source_before_);
}

QStringList DescribedClusterPanel::saved() const {
  QStringList out;
  for (const DescribedClusterSource& s : saved_) out << label_of(s);
  return out;
}

bool DescribedClusterPanel::use_saved(const QString& label) {
  for (const DescribedClusterSource& s : saved_) {
    if (label_of(s) != label) continue;
    name_->setText(QString::fromStdString(s.name));
    nodes_->setValue(s.nodes);
    gpus_->setValue(s.gpus_per_node);
    if (s.gpu == kCustom.toStdString() || !set_kind(QString::fromStdString(s.gpu)))
      set_custom(s.gpu_memory_bytes / kGiB, s.peak_flops_bf16 / 1e12, s.peak_flops_fp32 / 1e12,
                 s.intra_node_bytes_per_s / 1e9, s.inter_node_bytes_per_s / 1e9);
    plan_for_it();
    return true;
  }
  return false;
}

void DescribedClusterPanel::delete_saved() {
  const int i = saved_combo_->currentIndex();
  if (i <= 0 || i > static_cast<int>(saved_.size())) return;
  saved_.erase(saved_.begin() + (i - 1));
  store_saved();
  load_saved();
}

void DescribedClusterPanel::load_saved() {
  saved_.clear();
  const auto doc = nlohmann::json::parse(QSettings().value(kSettingsKey).toString().toStdString(), nullptr, false);
  if (doc.is_array())
    for (const auto& j : doc)
      if (auto s = cluster_source_from_json(j))
        if (const DescribedClusterSource* d = described_source(*s)) saved_.push_back(*d);
  saved_combo_->clear();
  saved_combo_->addItem(saved_.empty() ? tr("none saved yet") : tr("saved clusters…"));
  for (const DescribedClusterSource& s : saved_) saved_combo_->addItem(label_of(s));
  delete_->setEnabled(!saved_.empty());
}

void DescribedClusterPanel::store_saved() const {
  nlohmann::json list = nlohmann::json::array();
  for (const DescribedClusterSource& s : saved_) list.push_back(to_json(ClusterSource(s)));
  QSettings().setValue(kSettingsKey, QString::fromStdString(list.dump()));
}

void DescribedClusterPanel::update_state() {
  const DescribedClusterSource* d = described_source(model_->source());
  if (d) toggle_->setChecked(true);  // the form of the cluster being planned stays in view
  back_->setEnabled(d != nullptr);
  state_->setText(d ? tr("Planning for %1: nothing is reached, Launch and Calibrate wait for real nodes.").arg(label_of(*d))
                    : tr("Planning for the SSH nodes above."));
}

}  // namespace meshwork::ui
