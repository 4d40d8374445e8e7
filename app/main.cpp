#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "app/commands.h"
#include "core/build_info.h"
#include "core/resource_dir.h"

namespace {

void print_usage(std::ostream& out) {
  out << "usage: meshwork                     start the workbench (GUI)\n"
         "       meshwork --version           version, commit, where the resources and docs are\n"
         "       meshwork plan ...            rank every mesh shape for a model and cluster\n"
         "       meshwork probe HOST...       detect GPUs, memory and links of nodes over SSH\n"
         "       meshwork launch ...          deploy meshtrain and run it, streaming into the store\n"
         "       meshwork calibrate ...       measure matmuls and collectives on the nodes (for plan)\n"
         "       meshwork deploy ...          put a runtime bundle on the nodes ahead of a launch\n"
         "       meshwork attach RUN          follow a running run again\n"
         "       meshwork stop RUN            stop a run on every node\n"
         "       meshwork resume RUN          go on from the last checkpoint on the nodes left, re-planned\n"
         "       meshwork diagnose RUN        where a run hangs or slows (exit 3 when it does)\n"
         "       meshwork runs list|import|export|delete ...   the run store\n"
         "       meshwork data prepare|info ...   tokenize text into shards for training\n"
         "       meshwork serve ...           the run store live in a browser (runs, a run, compare)\n"
         "Run `meshwork COMMAND --help` for the options of one command.\n";
}

}  // namespace

namespace meshwork::cli {

int fail(const Error& e) {
  std::cerr << "meshwork: " << e.message() << "\n";
  return exit_code(e.kind);
}

}  // namespace meshwork::cli

int main(int argc, char** argv) {
  using namespace meshwork;
  using namespace meshwork::cli;
  if (argc >= 2) {
    const std::string cmd = argv[1];
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      print_usage(std::cout);
      return kExitOk;
    }
    if (cmd == "--version") {
      std::cout << version_line("meshwork") << "\n"
                << "resources: " << resource_dir().string() << "\n"
                << "docs: " << docs_dir().string() << "\n";
      return kExitOk;
    }
    static const std::map<std::string, int (*)(const Args&)> commands = {
        {"plan", plan_main},     {"runs", runs_main},     {"probe", probe_main},
        {"launch", launch_main}, {"attach", attach_main}, {"stop", stop_main},     {"resume", resume_main},
        {"data", data_main},     {"deploy", deploy_main}, {"calibrate", calibrate_main},
        {"serve", serve_main},   {"diagnose", diagnose_main}};
    if (auto it = commands.find(cmd); it != commands.end()) {
      Args args(argv + 2, argv + argc);
      try {
        return it->second(args);
      } catch (const std::exception& e) {
        return fail(Error{cmd, "", e.what()}.as(ErrorKind::internal));
      }
    }
    if (cmd.rfind("-", 0) != 0)
      return fail(Error{"command", cmd, "allowed: plan, probe, launch, calibrate, deploy, attach, stop, resume, diagnose, runs, data, serve (or none for the GUI)"});
  }
  return gui_main(argc, argv);
}
