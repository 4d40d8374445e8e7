// The Plan mode's workspace: the mesh editor on the left; on the right the mesh view (with its
// group picker), the memory bar and, in tabs, the planner table and the trials (the planner's top
// shapes run for a few steps and ranked by what they measured), one above the other in a splitter.
#pragma once

#include <QWidget>

class QButtonGroup;
class QLabel;
class QSplitter;
class QTabWidget;

namespace meshwork::ui {

class ClusterModel;
class MemoryPanel;
class MeshEditor;
class MeshView;
class PlannerPanel;
class PlanState;
class TrialsPanel;

class PlanPage : public QWidget {
  Q_OBJECT
 public:
  PlanPage(PlanState* state, ClusterModel* cluster, QWidget* parent = nullptr);

  MeshEditor* editor() const { return editor_; }
  MeshView* view() const { return view_; }
  MemoryPanel* memory() const { return memory_; }
  PlannerPanel* planner() const { return planner_; }
  TrialsPanel* trials() const { return trials_; }
  QTabWidget* lower_tabs() const { return tabs_; }  // Planner | Trials
  void show_trials();
  QSplitter* outer_splitter() const { return outer_; }
  QSplitter* right_splitter() const { return right_; }
  void refresh_colors();  // after a theme change

 private:
  void refresh_view();
  void refresh_memory();
  void try_top(int k, int steps);

  PlanState* state_;
  ClusterModel* cluster_;
  MeshEditor* editor_;
  MeshView* view_;
  MemoryPanel* memory_;
  PlannerPanel* planner_;
  TrialsPanel* trials_;
  QTabWidget* tabs_;
  QButtonGroup* kinds_;
  QLabel* shape_label_;
  QSplitter* outer_;
  QSplitter* right_;
};

}  // namespace meshwork::ui
