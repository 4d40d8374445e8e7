#include "ui/runs_page.h"

#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QMimeData>
#include <QUrl>

#include "core/interop/foreign_import.h"

#include <QCheckBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QStackedWidget>
#include <QTableView>
#include <QVBoxLayout>

#include "ui/flow_layout.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/runs_model.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

RunsPage::RunsPage(StoreWorker* worker, QWidget* parent)
    : QWidget(parent), worker_(worker), model_(new RunsModel(worker, this)), proxy_(new QSortFilterProxyModel(this)) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  stack_ = new QStackedWidget(this);
  outer->addWidget(stack_);

  auto* list = new QWidget(stack_);
  auto* l = new QVBoxLayout(list);
  l->setContentsMargins(12, 10, 12, 10);
  auto* bar = new_control_row(list);
  filter_ = new QLineEdit(list);
  filter_->setPlaceholderText(tr("Filter runs by name, shape, model or status"));
  filter_->setClearButtonEnabled(true);
  filter_->setMinimumWidth(240);
  count_ = new QLabel(list);
  count_->setProperty("role", "muted");
  open_ = new QPushButton(tr("Open"), list);
  compare_ = new QPushButton(tr("Compare"), list);
  rename_ = new QPushButton(tr("Rename…"), list);
  delete_ = new QPushButton(tr("Delete…"), list);
  export_ = new QPushButton(tr("Export CSV…"), list);
  auto* import = new QPushButton(tr("Import metrics file…"), list);
  auto* import_dir = new QPushButton(tr("Import run folder…"), list);
  follow_drops_ = new QCheckBox(tr("Follow dropped runs"), list);
  follow_drops_->setToolTip(tr("Keep reading files and folders dropped here while their tool writes them "
                               "(new event files and trainer_state.json included)"));
  compare_->setToolTip(tr("Compare 2–10 selected runs side by side"));
  import->setToolTip(tr("A metrics JSON-lines file written by meshtrain (--metrics PATH or metrics-rank<r>.jsonl), "
                        "a TensorBoard event file or a trainer_state.json"));
  import_dir->setToolTip(tr("A run directory: a TensorBoard log folder, a Trainer output_dir or meshtrain's metrics "
                            "folder (every file below it)"));
  bar->addWidget(filter_);
  bar->addWidget(count_);
  for (QPushButton* b : {open_, compare_, rename_, delete_, export_, import, import_dir}) bar->addWidget(b);
  bar->addWidget(follow_drops_);
  l->addWidget(bar->parentWidget());

  proxy_->setSourceModel(model_);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  proxy_->setFilterKeyColumn(-1);
  proxy_->setSortRole(RunsModel::kSortRole);
  table_ = new QTableView(list);
  table_->setObjectName("RunsTable");
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(RunsModel::kDate, Qt::DescendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setEditTriggers(QAbstractItemView::EditKeyPressed | QAbstractItemView::SelectedClicked);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(false);
  table_->horizontalHeader()->setSectionResizeMode(RunsModel::kName, QHeaderView::Stretch);
  table_->setShowGrid(false);
  table_->setWordWrap(false);
  l->addWidget(table_, 1);
  stack_->addWidget(list);

  // The monitor scrolls in a short window (1024 x 700) instead of raising the window's minimum.
  monitor_scroll_ = new QScrollArea(stack_);
  monitor_scroll_->setWidgetResizable(true);
  monitor_scroll_->setFrameShape(QFrame::NoFrame);
  monitor_scroll_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  monitor_ = new MonitorPage(worker, monitor_scroll_);
  monitor_scroll_->setWidget(monitor_);
  stack_->addWidget(monitor_scroll_);

  connect(filter_, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);
  connect(filter_, &QLineEdit::textChanged, this, &RunsPage::update_buttons);
  connect(model_, &RunsModel::loaded, this, [this] {
    table_->resizeColumnsToContents();
    table_->horizontalHeader()->setSectionResizeMode(RunsModel::kName, QHeaderView::Stretch);
    update_buttons();
  });
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &RunsPage::update_buttons);
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& i) {
    if (i.column() != RunsModel::kName) open_run(proxy_->data(i, RunsModel::kIdRole).toLongLong());
  });
  connect(open_, &QPushButton::clicked, this, [this] {
    auto ids = selected_runs();
    if (!ids.empty()) open_run(ids.front());
  });
  connect(compare_, &QPushButton::clicked, this, [this] { Q_EMIT compare_requested(selected_runs()); });
  connect(rename_, &QPushButton::clicked, this, &RunsPage::rename_selected);
  connect(delete_, &QPushButton::clicked, this, [this] { delete_selected(true); });
  connect(export_, &QPushButton::clicked, this, [this] { export_selected(); });
  connect(import, &QPushButton::clicked, this, [this] { import_metrics(); });
  connect(import_dir, &QPushButton::clicked, this, &RunsPage::import_folder);
  setAcceptDrops(true);
  connect(monitor_, &MonitorPage::back_requested, this, &RunsPage::show_list);
  update_buttons();
  model_->refresh();
}

bool RunsPage::showing_run() const { return stack_->currentWidget() == monitor_scroll_; }

void RunsPage::open_run(store::RunId id) {
  monitor_->show_run(id);
  stack_->setCurrentWidget(monitor_scroll_);
  Q_EMIT stoppable_run_changed();
}

void RunsPage::show_list() {
  stack_->setCurrentIndex(0);
  model_->refresh();
  Q_EMIT stoppable_run_changed();
}

store::RunId RunsPage::stoppable_run() const {
  const auto live = [](const std::string& status) {
    return status == store::kStatusRunning || status == store::kStatusCreated;
  };
  if (showing_run()) {
    const auto& f = monitor_->model()->frame();
    return f && live(f->summary.status) ? monitor_->run() : 0;
  }
  const auto ids = selected_runs();
  if (ids.size() != 1) return 0;
  const store::RunSummary* s = model_->find(ids.front());
  return s && live(s->status) ? s->id : 0;
}

std::vector<store::RunId> RunsPage::selected_runs() const {
  std::vector<store::RunId> ids;
  for (const QModelIndex& i : table_->selectionModel()->selectedRows())
    ids.push_back(proxy_->data(i, RunsModel::kIdRole).toLongLong());
  return ids;
}

void RunsPage::select_runs(const std::vector<store::RunId>& ids) {
  table_->clearSelection();
  for (store::RunId id : ids) {
    const int row = model_->row_of(id);
    if (row < 0) continue;
    const QModelIndex i = proxy_->mapFromSource(model_->index(row, 0));
    table_->selectionModel()->select(i, QItemSelectionModel::Select | QItemSelectionModel::Rows);
  }
}

void RunsPage::update_buttons() {
  const size_t n = selected_runs().size();
  open_->setEnabled(n == 1);
  rename_->setEnabled(n == 1);
  export_->setEnabled(n == 1);
  delete_->setEnabled(n >= 1);
  compare_->setEnabled(n >= 2 && n <= 10);
  count_->setText(tr("%1 of %2 runs").arg(proxy_->rowCount()).arg(model_->rowCount()));
  Q_EMIT stoppable_run_changed();
}

void RunsPage::delete_selected(bool confirm) {
  const auto ids = selected_runs();
  if (ids.empty()) return;
  if (confirm) {
    QStringList names;
    for (store::RunId id : ids)
      if (const auto* s = model_->find(id)) names << QStringLiteral("%1 (#%2)").arg(QString::fromStdString(s->name)).arg(id);
    const auto answer = QMessageBox::question(
        this, tr("Delete runs"),
        tr("Delete %n run(s) and every metric stored with them? This cannot be undone.\n\n%1", nullptr,
           static_cast<int>(ids.size())).arg(names.join('\n')),
        QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel);
    if (answer != QMessageBox::Yes) return;
  }
  model_->remove(ids, [this, n = ids.size()](QString e) {
    Q_EMIT status_message(e.isEmpty() ? tr("Deleted %n run(s)", nullptr, static_cast<int>(n)) : e);
  });
}

void RunsPage::rename_selected() {
  const auto ids = selected_runs();
  if (ids.size() != 1) return;
  const auto* s = model_->find(ids[0]);
  bool ok = false;
  const QString name = QInputDialog::getText(this, tr("Rename run"), tr("Name:"), QLineEdit::Normal,
                                             s ? QString::fromStdString(s->name) : QString(), &ok);
  if (ok && !name.trimmed().isEmpty()) model_->rename(ids[0], name.trimmed());
}

void RunsPage::export_selected(const QString& given) {
  const auto ids = selected_runs();
  if (ids.size() != 1) return;
  QString path = given;
  if (path.isEmpty()) {
    const auto* s = model_->find(ids[0]);
    path = QFileDialog::getSaveFileName(this, tr("Export the run's points"),
                                        QStringLiteral("%1-%2.csv").arg(s ? QString::fromStdString(s->name) : "run").arg(ids[0]),
                                        tr("CSV (*.csv)"));
  }
  if (path.isEmpty()) return;
  model_->export_csv(ids[0], path, [this, path](QString e) {
    Q_EMIT status_message(e.isEmpty() ? tr("Exported %1").arg(path) : e);
  });
}

void RunsPage::import_metrics(const QString& given, bool follow) {
  QString path = given;
  if (path.isEmpty()) {
    path = QFileDialog::getOpenFileName(this, tr("Import a metrics file"), {}, 
                                        tr("Runs (*.jsonl *.json *.log events.out.tfevents.*);;All files (*)"));
    if (path.isEmpty()) return;
    follow = QMessageBox::question(this, tr("Follow the file?"),
                                   tr("Keep reading what is appended to this file (a run still writing it)?"),
                                   QMessageBox::Yes | QMessageBox::No, QMessageBox::No) == QMessageBox::Yes;
  }
  // Another tool's file is named by the tool, not the run: the run takes its directory's name;
  // a run directory is named after itself.
  const QFileInfo info(path);
  const bool foreign = interop::foreign_format(path.toStdString()) != interop::ForeignFormat::none;
  const QString name = info.isDir() ? QDir(info.absoluteFilePath()).dirName()
                       : foreign    ? info.dir().dirName()
                                    : info.completeBaseName();
  model_->import_file(path, name, follow, [this, path](qint64 id, QString e) {
    Q_EMIT status_message(e.isEmpty() ? tr("Imported %1 as run %2").arg(path).arg(id) : e);
  });
}

void RunsPage::import_folder() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Import a run folder"));
  if (dir.isEmpty()) return;
  const bool follow = QMessageBox::question(this, tr("Follow the folder?"),
                                            tr("Keep reading this folder while its tool writes it (new event "
                                               "files and trainer_state.json included)?"),
                                            QMessageBox::Yes | QMessageBox::No, QMessageBox::No) == QMessageBox::Yes;
  import_metrics(dir, follow);
}

void RunsPage::import_dropped(const QList<QUrl>& urls) {
  for (const QUrl& url : urls) {
    if (!url.isLocalFile()) continue;
    const QFileInfo info(url.toLocalFile());
    if (info.isFile() || info.isDir()) import_metrics(info.absoluteFilePath(), follow_drops_->isChecked());
  }
}

void RunsPage::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void RunsPage::dropEvent(QDropEvent* event) {
  if (!event->mimeData()->hasUrls()) return;
  import_dropped(event->mimeData()->urls());
  event->acceptProposedAction();
}

}  // namespace meshwork::ui
