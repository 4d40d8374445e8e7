// The mode bar down the left edge (as Qt Creator has): Cluster · Plan · Runs · Compare. Icons are
// drawn here, so there is no image file to keep in step with the themes.
#pragma once

#include <QWidget>
#include <vector>

class QButtonGroup;
class QToolButton;

namespace meshwork::ui {

enum class Mode { cluster = 0, plan = 1, runs = 2, compare = 3 };

class ModeBar : public QWidget {
  Q_OBJECT
 public:
  explicit ModeBar(QWidget* parent = nullptr);
  void set_mode(Mode mode);
  Mode mode() const { return mode_; }
  QToolButton* button(Mode mode) const { return buttons_[static_cast<size_t>(mode)]; }

 Q_SIGNALS:
  void mode_changed(meshwork::ui::Mode mode);

 private:
  std::vector<QToolButton*> buttons_;
  QButtonGroup* group_;
  Mode mode_ = Mode::plan;
};

}  // namespace meshwork::ui
