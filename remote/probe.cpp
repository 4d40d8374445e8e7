#include "remote/probe.h"

#include <map>
#include <thread>

#include "remote/parse_util.h"

namespace meshwork::remote {

using namespace detail;

const std::string& probe_script() {
  // POSIX sh. Every section is printed even when its tool is missing, so the parser sees what
  // is absent rather than guessing. No value from the user appears in this script.
  static const std::string script = R"SH(
echo @@hostname; hostname 2>/dev/null || cat /proc/sys/kernel/hostname
echo @@os; cat /etc/os-release 2>/dev/null
echo @@kernel; uname -r
echo @@arch; uname -m
echo @@nproc; nproc 2>/dev/null || getconf _NPROCESSORS_ONLN
echo @@meminfo; cat /proc/meminfo
echo @@ssh; echo "$SSH_CONNECTION"
if command -v nvidia-smi >/dev/null 2>&1; then
  echo @@gpu; nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,memory.used,compute_cap,driver_version --format=csv,noheader,nounits 2>&1; echo "@@gpu_rc $?"
  echo @@topo; nvidia-smi topo -m 2>&1
fi
echo @@ib
for p in /sys/class/infiniband/*/ports/*; do
  [ -d "$p" ] || continue
  d=${p%/ports/*}; d=${d##*/}
  echo "$d ${p##*/} $(cat "$p/state" 2>/dev/null)|$(cat "$p/rate" 2>/dev/null)|$(cat "$p/link_layer" 2>/dev/null)"
done
echo @@torch
for py in python3 python; do
  command -v $py >/dev/null 2>&1 && $py -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null && break
done
echo @@libtorch
for f in $(ldconfig -p 2>/dev/null | awk '/libtorch_cpu\.so/ {print $NF}') $HOME/.cache/meshwork/torch-*/lib/python3*/site-packages/torch/lib/libtorch_cpu.so; do
  [ -f "$f" ] && echo "$f"
done
echo @@end
)SH";
  return script;
}

Result<NodeInfo> parse_probe_output(const std::string& output) {
  std::map<std::string, std::string> sections;
  std::string current;
  int gpu_rc = 0;
  for (const std::string& line : split_lines(output)) {
    if (starts_with(line, "@@")) {
      if (starts_with(line, "@@gpu_rc ")) {
        gpu_rc = static_cast<int>(to_int(line.substr(9)).value_or(1));
        current.clear();
        continue;
      }
      current = line.substr(2);
      sections[current];
      continue;
    }
    if (!current.empty()) sections[current] += line + "\n";
  }
  if (!sections.count("end")) {
    return Error{"probe", output.substr(0, 200), "the probe script did not run to its end"};
  }
  NodeInfo n;
  n.hostname = std::string(trim(sections["hostname"]));
  n.os = parse_os_release(sections["os"]);
  n.kernel = std::string(trim(sections["kernel"]));
  n.arch = std::string(trim(sections["arch"]));
  n.cpus = static_cast<int>(to_int(sections["nproc"]).value_or(0));
  if (auto mem = parse_meminfo(sections["meminfo"])) {
    n.mem_total_bytes = mem->total_bytes;
    n.mem_available_bytes = mem->available_bytes;
  } else {
    n.warnings.push_back(mem.error().message());
  }
  // SSH_CONNECTION = "client_ip client_port server_ip server_port".
  auto ssh = words(sections["ssh"]);
  if (ssh.size() == 4) {
    n.client_address = ssh[0];
    n.address = ssh[2];
  }
  if (sections.count("gpu")) {
    if (gpu_rc != 0) {
      n.warnings.push_back("nvidia-smi failed (treated as a CPU node): " +
                           std::string(trim(sections["gpu"])).substr(0, 200));
    } else if (auto gpus = parse_query_gpu_csv(sections["gpu"])) {
      n.gpus = *gpus;
      if (!n.gpus.empty()) {
        if (auto topo = parse_topo_matrix(sections["topo"])) {
          n.topo = *topo;
          n.gpu_link = topo->weakest_gpu_link();
        } else {
          n.warnings.push_back("nvidia-smi topo -m: " + topo.error().message());
        }
      }
    } else {
      n.warnings.push_back(gpus.error().message());
    }
  }
  if (auto ib = parse_sysfs_ib_listing(sections["ib"])) n.ib_ports = *ib;
  n.torch_version = std::string(trim(sections["torch"]));
  for (const std::string& l : split_lines(sections["libtorch"])) {
    if (!trim(l).empty()) n.libtorch.push_back(std::string(trim(l)));
  }
  return n;
}

Result<NodeInfo> probe_node(Node& node) {
  auto r = node.exec("sh -s", std::chrono::seconds(60), probe_script());
  if (!r) return r.error();
  auto info = parse_probe_output(r->out);
  if (!info) return Error{node.name(), info.error().value, info.error().allowed + "; stderr: " + r->err.substr(0, 300)};
  info->host = node.name();
  info->fingerprint = node.fingerprint();
  if (node.is_local() && info->address.empty()) info->address = "127.0.0.1";
  return info;
}

std::vector<ProbeResult> probe_hosts(const std::vector<HostSpec>& hosts, const SshOptions& options,
                                     const ProbeProgressFn& progress) {
  std::vector<ProbeResult> results(hosts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < hosts.size(); ++i) {
    threads.emplace_back([&, i] {
      ProbeResult& res = results[i];
      res.spec = hosts[i];
      const std::string host = hosts[i].to_string();
      auto report = [&](std::string stage, std::string msg) {
        if (progress) progress(ProbeProgress{i, host, std::move(stage), std::move(msg)});
      };
      report("connecting", "");
      auto conn = connect_node(hosts[i], options);
      if (auto* err = std::get_if<ConnectError>(&conn)) {
        res.error = *err;
        report("failed", err->error.message());
        return;
      }
      Node& node = *std::get<0>(conn);
      report("probing", "");
      auto info = probe_node(node);
      if (!info) {
        res.error = ConnectError{ConnectFailure::protocol, info.error(), node.fingerprint()};
        report("failed", info.error().message());
        return;
      }
      res.info = *info;
      report("done", info->hostname);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

nlohmann::json to_json(const NodeInfo& n) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuInfo& g : n.gpus) {
    gpus.push_back({{"index", g.index}, {"name", g.name}, {"uuid", g.uuid}, {"pci_bus_id", g.pci_bus_id},
                    {"memory_total_mib", g.memory_total_mib}, {"memory_used_mib", g.memory_used_mib},
                    {"compute_cap", g.compute_cap}, {"driver_version", g.driver_version}});
  }
  nlohmann::json ib = nlohmann::json::array();
  for (const IbPort& p : n.ib_ports) {
    ib.push_back({{"device", p.device}, {"port", p.port}, {"state", p.state},
                  {"link_layer", p.link_layer}, {"rate_gbps", p.rate_gbps}});
  }
  nlohmann::json topo = nullptr;
  if (n.topo) {
    nlohmann::json links = nlohmann::json::array();
    for (const auto& row : n.topo->links) {
      nlohmann::json r = nlohmann::json::array();
      for (const TopoLink& l : row) r.push_back(l.text());
      links.push_back(r);
    }
    topo = {{"devices", n.topo->devices}, {"nic_names", n.topo->nic_names}, {"links", links},
            {"cpu_affinity", n.topo->cpu_affinity}, {"numa_affinity", n.topo->numa_affinity}};
  }
  return {{"host", n.host},
          {"hostname", n.hostname},
          {"os", n.os},
          {"kernel", n.kernel},
          {"arch", n.arch},
          {"cpus", n.cpus},
          {"mem_total_bytes", n.mem_total_bytes},
          {"mem_available_bytes", n.mem_available_bytes},
          {"address", n.address},
          {"fingerprint", n.fingerprint},
          {"kind", n.is_cpu_node() ? "cpu" : "gpu"},
          {"gpus", gpus},
          {"gpu_link", n.gpu_link},
          {"topo", topo},
          {"ib_ports", ib},
          {"torch_version", n.torch_version},
          {"libtorch", n.libtorch},
          {"warnings", n.warnings}};
}

}  // namespace meshwork::remote
