// The Plan mode's workspace: the mesh editor on the left; on the right the mesh view (with its
// group picker), the memory bar and the planner table, one above the other in a splitter.
#pragma once

#include <QWidget>

class QButtonGroup;
class QLabel;
class QSplitter;

namespace meshwork::ui {

class ClusterModel;
class MemoryPanel;
class MeshEditor;
class MeshView;
class PlannerPanel;
class PlanState;

class PlanPage : public QWidget {
  Q_OBJECT
 public:
  PlanPage(PlanState* state, ClusterModel* cluster, QWidget* parent = nullptr);

  MeshEditor* editor() const { return editor_; }
  MeshView* view() const { return view_; }
  MemoryPanel* memory() const { return memory_; }
  PlannerPanel* planner() const { return planner_; }
  QSplitter* outer_splitter() const { return outer_; }
  QSplitter* right_splitter() const { return right_; }
  void refresh_colors();  // after a theme change

 private:
  void refresh_view();
  void refresh_memory();

  PlanState* state_;
  ClusterModel* cluster_;
  MeshEditor* editor_;
  MeshView* view_;
  MemoryPanel* memory_;
  PlannerPanel* planner_;
  QButtonGroup* kinds_;
  QLabel* shape_label_;
  QSplitter* outer_;
  QSplitter* right_;
};

}  // namespace meshwork::ui
