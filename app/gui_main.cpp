// `meshwork` with no arguments: the workbench.
#include "app/commands.h"
#ifdef MESHWORK_WITH_GUI
#include <QApplication>

#include "ui/main_window.h"
#include "ui/screenshots.h"
#include "ui/theme.h"
#endif
#include <iostream>
#include <string>

namespace meshwork::cli {

int gui_main(int argc, char** argv) {
#ifdef MESHWORK_WITH_GUI
  QApplication app(argc, argv);
  QApplication::setOrganizationName("Meshwork");
  QApplication::setApplicationName("workbench");
  QApplication::setApplicationDisplayName("Meshwork");
  // The menu entry (share/applications/meshwork.desktop) and its icon belong to this window.
  QGuiApplication::setDesktopFileName("meshwork");
  ui::apply_theme(app, ui::Theme::light);
  // `meshwork --screenshots DIR`: render the main views to PNGs (scripts/screenshots) and exit.
  // `meshwork --screenshots DIR health`: only the Health view's (a real run; a few minutes);
  // `... experts`: only the Monitor's expert load (a real run of a tiny mixture of experts).
  // `... runs`: only the pictures of a real launch on this machine and of the recorded runs.
  if (argc >= 3 && std::string(argv[1]) == "--screenshots")
    return ui::render_screenshots(argv[2], argc >= 4 ? argv[3] : "");
  // `meshwork --db PATH`: another run store than the default (the CLI's --db).
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--db") qputenv("MESHWORK_DB", QByteArray(argv[i + 1]));
  ui::MainWindow window;
  window.resize(1440, 900);
  window.show();
  // Runs keep going while the workbench is closed; follow the ones still running.
  window.attach_running();
  return app.exec();
#else
  (void)argc;
  (void)argv;
  std::cerr << "meshwork: this build has no workbench (configured with MESHWORK_WITH_GUI=OFF)\n";
  return kExitError;
#endif
}

}  // namespace meshwork::cli
