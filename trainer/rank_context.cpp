#include "trainer/rank_context.h"

#include <thread>

#include "trainer/watchdog.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "trainer/supervisor.h"

namespace meshwork::trainer {
namespace fs = std::filesystem;

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

RankContext::RankContext(const TrainerOptions& o, const LaunchEnv& env)
    : o_(o),
      env_(env),
      log(run_file("rank" + std::to_string(env.rank) + ".log"),
          std::getenv("MESHWORK_SUPERVISED") == nullptr && env.rank == 0),
      sink(run_file("metrics-rank" + std::to_string(env.rank) + ".jsonl"), o.metrics,
           o.metrics.empty() && env.rank == 0) {}

fs::path RankContext::run_file(const std::string& name) const { return fs::path(o_.run_dir) / name; }

void RankContext::end(const std::string& status, const std::string& reason) {
  EndRecord e;
  e.rank = rank();
  e.time = now_unix();
  e.status = status;
  e.reason = reason;
  sink.write(to_json_line(e));
}

int RankContext::fail(int code, const std::string& msg, bool tell) {
  log(msg);
  end("failed", msg);
  if (tell && rank() == 0) std::cerr << "meshtrain: " << msg << "\n";
  return code;
}

int RankContext::run(const std::function<int()>& task) {
  if (!sink.ok()) {
    std::cerr << "meshtrain: --metrics: " << o_.metrics << ": a writable file\n";
    return 2;
  }
  {
    std::ofstream pid(run_file("rank" + std::to_string(rank()) + ".pid"));
    pid << getpid() << "\n";
  }
  try {
    threads_ = std::max(1, usable_cores() / std::max(1, env_.local_world_size));
    at::set_num_threads(threads_);
    if (o_.run.training.device == DeviceKind::cuda) {
      if (!torch::cuda::is_available()) return fail(2, "--device: cuda: no CUDA device is visible");
      c10::cuda::set_device(static_cast<c10::DeviceIndex>(env_.local_rank));
      device_ = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env_.local_rank));
    }
    return task();
  } catch (const std::exception& e) {
    // The watchdog found this rank's collective past its timeout and ends the process with its
    // finding; a peer it stopped makes this collective fail meanwhile, with an error naming none.
    if (watchdog_firing()) std::this_thread::sleep_for(std::chrono::minutes(5));
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what = what.substr(0, nl);
    log("failed: ", e.what());
    end("failed", what);
    return 3;
  }
}

Result<std::unique_ptr<Communicator>> RankContext::connect(const MeshShape& shape, bool first,
                                                           const std::string& group_prefix) const {
  CommOptions co;
  co.rank = rank();
  co.world_size = env_.world_size;
  co.ranks_per_node = env_.local_world_size;
  co.shape = shape;
  co.device = o_.run.training.device;
  co.master_addr = env_.master_addr;
  co.master_port = env_.master_port;
  co.host_store = first && rank() == 0 && !env_.store_hosted;
  co.group_prefix = group_prefix;
  return Communicator::create(co);
}

StartRecord RankContext::start_record(const Communicator& comm) const {
  StartRecord sr;
  sr.rank = rank();
  sr.time = now_unix();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  sr.host = host;
  sr.pid = getpid();
  sr.node = comm.mesh().node_of(rank());
  sr.world = env_.world_size;
  sr.versions = {{"meshtrain", MESHWORK_VERSION},
                 {"torch", TORCH_VERSION},
                 {"backend", cuda() ? "nccl" : "gloo"},
                 {"threads", threads_}};
  return sr;
}

}  // namespace meshwork::trainer
