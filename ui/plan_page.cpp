#include "ui/plan_page.h"

#include <QButtonGroup>
#include <QHBoxLayout>
#include <QLabel>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/axis_colors.h"
#include "ui/cluster_model.h"
#include "ui/flow_layout.h"
#include "ui/format.h"
#include "ui/memory_panel.h"
#include "ui/mesh_editor.h"
#include "ui/mesh_view.h"
#include "ui/plan_state.h"
#include "ui/planner_panel.h"
#include "ui/theme.h"
#include "ui/trials_controller.h"
#include "ui/trials_panel.h"

namespace meshwork::ui {

namespace {
QStringList node_names(const ClusterModel& m) {
  QStringList out;
  for (const NodeInfo& n : m.nodes()) {
    if (!n.counted()) continue;  // the plan places ranks on the nodes that answered only
    out << (n.is_local() ? QStringLiteral("local") : (n.hostname.isEmpty() ? n.host : n.hostname));
  }
  return out;
}
}  // namespace

PlanPage::PlanPage(PlanState* state, ClusterModel* cluster, QWidget* parent)
    : QWidget(parent), state_(state), cluster_(cluster) {
  setObjectName("PlanPage");
  auto* lay = new QHBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  outer_ = new QSplitter(Qt::Horizontal, this);
  outer_->setObjectName("PlanOuterSplitter");
  lay->addWidget(outer_);

  auto* editor_scroll = new QScrollArea(outer_);
  editor_scroll->setWidgetResizable(true);
  editor_scroll->setFrameShape(QFrame::NoFrame);
  editor_ = new MeshEditor(state_, editor_scroll);
  editor_scroll->setWidget(editor_);
  editor_scroll->setMinimumWidth(330);
  editor_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  outer_->addWidget(editor_scroll);

  right_ = new QSplitter(Qt::Vertical, outer_);
  right_->setObjectName("PlanRightSplitter");
  auto* mesh_box = new QWidget(right_);
  auto* ml = new QVBoxLayout(mesh_box);
  ml->setContentsMargins(0, 6, 0, 0);
  ml->setSpacing(4);
  // The picker wraps onto a second line in narrow windows instead of forcing a wide minimum.
  auto* picker_host = new QWidget(mesh_box);
  auto* picker = new FlowLayout(picker_host, 4);
  picker->setContentsMargins(12, 0, 12, 0);
  auto* pl = new QLabel(tr("Colour groups of"), picker_host);
  pl->setProperty("role", "muted");
  pl->setMinimumHeight(24);
  picker->addWidget(pl);
  kinds_ = new QButtonGroup(this);
  for (GroupKind g : kGroupKinds) {
    auto* b = new QToolButton(picker_host);
    b->setText(QString::fromUtf8(group_name(g).data()));
    b->setIcon(QIcon(color_swatch(group_color(g, is_dark()))));
    b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    b->setCheckable(true);
    b->setAutoRaise(true);
    b->setToolTip(tr("Colour the %1 groups").arg(group_label(g)));
    b->setObjectName(QStringLiteral("kind_%1").arg(QString::fromUtf8(group_name(g).data())));
    kinds_->addButton(b, static_cast<int>(g));
    picker->addWidget(b);
  }
  shape_label_ = new QLabel(picker_host);
  shape_label_->setObjectName("ShapeLabel");
  shape_label_->setMinimumHeight(24);
  shape_label_->setContentsMargins(16, 0, 0, 0);
  picker->addWidget(shape_label_);
  ml->addWidget(picker_host);
  view_ = new MeshView(mesh_box);
  ml->addWidget(view_, 1);
  right_->addWidget(mesh_box);
  memory_ = new MemoryPanel(right_);
  right_->addWidget(memory_);
  tabs_ = new QTabWidget(right_);
  tabs_->setObjectName("PlanTabs");
  tabs_->setDocumentMode(true);
  planner_ = new PlannerPanel(state_, tabs_);
  trials_ = new TrialsPanel(tabs_);
  tabs_->addTab(planner_, tr("Planner"));
  tabs_->addTab(trials_, tr("Trials"));
  right_->addWidget(tabs_);
  right_->setStretchFactor(0, 5);
  right_->setStretchFactor(1, 0);
  right_->setStretchFactor(2, 3);
  right_->setCollapsible(1, false);
  outer_->addWidget(right_);
  outer_->setStretchFactor(0, 0);
  outer_->setStretchFactor(1, 1);
  outer_->setSizes({350, 1000});
  right_->setSizes({500, 118, 260});

  kinds_->button(static_cast<int>(view_->group_kind()))->setChecked(true);
  connect(view_, &MeshView::group_kind_changed, this, [this](GroupKind g) {
    if (auto* b = kinds_->button(static_cast<int>(g))) b->setChecked(true);
  });
  connect(kinds_, &QButtonGroup::idClicked, this,
          [this](int id) { view_->set_group_kind(static_cast<GroupKind>(id)); });
  connect(state_, &PlanState::changed, this, &PlanPage::refresh_view);
  connect(state_, &PlanState::memory_changed, this, &PlanPage::refresh_memory);
  // Trials: asked for in the planner, shown in their tab; Apply sets the shape as a planner row does.
  connect(planner_, &PlannerPanel::try_requested, this, &PlanPage::try_top);
  connect(trials_, &TrialsPanel::apply_requested, planner_, &PlannerPanel::apply_shape);
  connect(trials_->controller(), &TrialsController::started, this, [this] { planner_->set_trials_running(true); });
  connect(trials_->controller(), &TrialsController::finished, this, [this] { planner_->set_trials_running(false); });
  connect(trials_->controller(), &TrialsController::failed, this, [this] {
    planner_->set_trials_running(trials_->controller()->running());
  });
  refresh_view();
  refresh_memory();
}

void PlanPage::show_trials() { tabs_->setCurrentWidget(trials_); }

void PlanPage::try_top(int k, int steps) {
  // The plan's configuration as the Launch action would run it, each trial with its own shape.
  show_trials();
  if (trials_->try_top(state_->config(), state_->plan(), k, steps)) planner_->set_trials_running(true);
}

void PlanPage::refresh_colors() {
  for (GroupKind g : kGroupKinds)
    if (auto* b = kinds_->button(static_cast<int>(g))) b->setIcon(QIcon(color_swatch(group_color(g, is_dark()))));
  editor_->refresh_colors();
  refresh_view();
}

void PlanPage::refresh_view() {
  const auto& mesh = state_->mesh();
  view_->set_mesh(mesh, state_->cluster().fast_links, node_names(*cluster_));
  QString first_error;
  for (const Diagnostic& d : state_->diagnostics())
    if (is_error(d)) {
      first_error = QString::fromStdString(d.text());
      break;
    }
  memory_->set_shape_valid(first_error.isEmpty());
  view_->set_invalid_text(first_error.isEmpty() ? tr("No valid mesh to draw.")
                                                : tr("This shape is not valid:\n%1").arg(first_error));
  if (mesh) {
    QString text = tr("<b>%1</b> ranks = %2").arg(mesh->world_size()).arg(format_shape(mesh->shape(), QStringLiteral(" × ")));
    if (!first_error.isEmpty())
      text += tr(" · <span style='color:%1'>not valid: see the editor</span>").arg(error_color().name());
    shape_label_->setText(text);
  } else {
    shape_label_->setText(tr("<span style='color:%1'>invalid shape</span>").arg(error_color().name()));
  }
}

void PlanPage::refresh_memory() {
  memory_->set_breakdown(state_->memory(), QString::fromStdString(state_->memory_error()),
                         QString::fromStdString(state_->cluster().device_name));
}

}  // namespace meshwork::ui
