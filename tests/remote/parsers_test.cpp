// The probe parsers on real recorded outputs (tests/data/gpu-cluster, see its SOURCES.md), one
// by one and as a sweep over every file there.
#include <gtest/gtest.h>

#include <algorithm>

#include "remote/probe.h"
#include "remote/probe_parsers.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

using test::data;

TEST(TopoParser, EightH100NvlinkSixNicsSlurmEmptyAffinity) {
  auto m = parse_topo_matrix(data("topo_8xH100_sxm_6nic_della.txt"));
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->devices.size(), 14u);
  EXPECT_EQ(m->gpu_rows().size(), 8u);
  EXPECT_EQ(m->nic_rows().size(), 6u);
  EXPECT_TRUE(m->all_gpus_nvlinked());
  EXPECT_EQ(m->weakest_gpu_link(), "NV18");
  EXPECT_EQ(m->links[0][0].kind, LinkKind::self);
  EXPECT_EQ(m->links[0][8].text(), "PIX");   // GPU0 - NIC0
  EXPECT_EQ(m->links[3][10].text(), "PIX");  // GPU3 - NIC2
  EXPECT_EQ(m->nic_names[8], "mlx5_0");
  EXPECT_EQ(m->nic_names[13], "mlx5_5");
  // Recorded inside a Slurm job: CPU Affinity is empty for GPU0-3 and "1" for GPU4-7.
  EXPECT_EQ(m->cpu_affinity[0], "");
  EXPECT_EQ(m->numa_affinity[0], "0");
  EXPECT_EQ(m->cpu_affinity[4], "1");
}

TEST(TopoParser, PcieBoxWithSpacesInsteadOfTabs) {
  auto m = parse_topo_matrix(data("topo_pcie_4xRTX6000Ada_4nic_spaces.txt"));
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->gpu_rows().size(), 4u);
  EXPECT_EQ(m->nic_rows().size(), 4u);
  EXPECT_FALSE(m->all_gpus_nvlinked());
  EXPECT_EQ(m->weakest_gpu_link(), "SYS");
}

TEST(TopoParser, OldFormatWithMlxRowsAndNoNumaIdColumn) {
  auto m = parse_topo_matrix(data("topo_2xA100_pcie_2mlx5_della.txt"));
  ASSERT_TRUE(m.ok()) << m.error().message();
  ASSERT_EQ(m->devices, (std::vector<std::string>{"GPU0", "GPU1", "mlx5_0", "mlx5_1"}));
  EXPECT_EQ(m->nic_names[2], "mlx5_0");
  EXPECT_EQ(m->weakest_gpu_link(), "SYS");
  EXPECT_EQ(m->links[0][2].text(), "NODE");
  EXPECT_EQ(m->cpu_affinity[1], "64-127");
  EXPECT_EQ(m->numa_affinity[1], "1");
}

TEST(TopoParser, AnsiUnderlinedHeaderSingleGpu) {
  auto m = parse_topo_matrix(data("topo_1xH100_vm_ansi_header.txt"));
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->devices, std::vector<std::string>{"GPU0"});
  EXPECT_EQ(m->weakest_gpu_link(), "");
  EXPECT_EQ(m->cpu_affinity[0], "0-19");
}

TEST(TopoParser, NicRowsWithoutTrailingColumns) {
  auto m = parse_topo_matrix(data("topo_pcie_8xRTX4090_2nic_sys.txt"));
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->devices.size(), 10u);
  EXPECT_EQ(m->links[6][8].text(), "PHB");  // GPU6 - NIC0
  EXPECT_EQ(m->links[8][9].text(), "PIX");  // NIC0 - NIC1
  EXPECT_EQ(m->cpu_affinity[4], "56-111,168-223");
}

TEST(TopoParser, RefusesGarbage) {
  EXPECT_FALSE(parse_topo_matrix("").ok());
  EXPECT_FALSE(parse_topo_matrix("\tGPU0\tGPU1\nGPU0\t X \tQQ\nGPU1\tSYS\t X \n").ok());
  EXPECT_FALSE(parse_topo_matrix("\tGPU0\tGPU1\nGPU0\t X \n").ok());
}

TEST(QueryGpuCsv, HeaderWithUnitsInHeaderAndValues) {
  auto g = parse_query_gpu_csv(data("query_gpu_2xA100_pcie_10fields.csv"));
  ASSERT_TRUE(g.ok()) << g.error().message();
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[0].name, "NVIDIA A100-PCIE-40GB");
  EXPECT_EQ((*g)[1].pci_bus_id, "00000000:8A:00.0");
  EXPECT_EQ((*g)[0].memory_total_mib, 40960);
  EXPECT_EQ((*g)[0].memory_used_mib, 1);
  EXPECT_EQ((*g)[1].index, 1);  // no index column: position
  EXPECT_EQ((*g)[0].fields.at("utilization.gpu"), "0");
}

TEST(QueryGpuCsv, EightH100NameAndMemory) {
  auto g = parse_query_gpu_csv(data("query_gpu_8xH100_name_memtotal.csv"));
  ASSERT_TRUE(g.ok()) << g.error().message();
  ASSERT_EQ(g->size(), 8u);
  for (const auto& gpu : *g) {
    EXPECT_EQ(gpu.name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(gpu.memory_total_mib, 81559);
  }
}

// The probe's own format (noheader,nounits) in the probe's field order. Constructed from the
// values of the recorded 8xH100 table (smi_8xH100_sxm_550.txt), as no recording of exactly
// this query exists in the collection.
TEST(QueryGpuCsv, ProbeFormatWithoutHeader) {
  const std::string text =
      "0, NVIDIA H100 80GB HBM3, GPU-5269b708-678a-b1a8-60f0-c90406537486, 00000000:19:00.0, 81559, 1, 9.0, 550.90.07\n"
      "1, NVIDIA H100 80GB HBM3, GPU-3fb142e7-7102-c7ac-bd5a-fc829e11ed84, 00000000:3B:00.0, 81559, 1, 9.0, 550.90.07\n";
  auto g = parse_query_gpu_csv(text);
  ASSERT_TRUE(g.ok()) << g.error().message();
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[1].index, 1);
  EXPECT_EQ((*g)[1].uuid, "GPU-3fb142e7-7102-c7ac-bd5a-fc829e11ed84");
  EXPECT_EQ((*g)[0].compute_cap, "9.0");
  EXPECT_EQ((*g)[0].driver_version, "550.90.07");
  EXPECT_FALSE(parse_query_gpu_csv("0, only three, fields\n").ok());
}

// A garbled line's negative numbers are not sizes or indices: unknown, as "[N/A]" (fuzzer find).
TEST(QueryGpuCsv, NegativeMemoryAndIndexAreUnknown) {
  auto g = parse_query_gpu_csv("name, memory.total [MiB], index\nNVIDIA H100 80GB HBM3, -1559 MiB, -3\n");
  ASSERT_TRUE(g.ok()) << g.error().message();
  ASSERT_EQ(g->size(), 1u);
  EXPECT_EQ((*g)[0].memory_total_mib, -1);
  EXPECT_EQ((*g)[0].index, 0);  // its position, as for a row without an index
}

TEST(SmiTable, EightH100) {
  auto s = parse_smi_table(data("smi_8xH100_sxm_550.txt"));
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->driver_version, "550.90.07");
  EXPECT_EQ(s->cuda_version, "12.4");
  ASSERT_EQ(s->gpus.size(), 8u);
  EXPECT_EQ(s->gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(s->gpus[0].bus_id, "00000000:19:00.0");
  EXPECT_EQ(s->gpus[0].memory_total_mib, 81559);
  EXPECT_EQ(s->gpus[7].index, 7);
  EXPECT_EQ(s->process_rows, 0);
}

TEST(SmiTable, LegacyLayoutAndProcessRows) {
  auto s = parse_smi_table(data("smi_1xA100_pcie_510_legacy_esxi.txt"));
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->cuda_version, "N/A");
  ASSERT_EQ(s->gpus.size(), 1u);
  EXPECT_EQ(s->gpus[0].name, "NVIDIA A100-PCI...");
  EXPECT_EQ(s->gpus[0].memory_total_mib, 40960);
  auto p = parse_smi_table(data("smi_1xA100_80gb_pcie_575_with_process.txt"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->process_rows, 1);
  EXPECT_EQ(p->gpus[0].memory_used_mib, 1187);
}

TEST(Ibstat, InfiniBandAndRoceMixed) {
  auto p = parse_ibstat(data("ibstat_a100_mt4126_ib_and_roce.txt"));
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->size(), 9u);
  const auto ib = std::count_if(p->begin(), p->end(), [](const IbPort& x) { return !x.roce(); });
  EXPECT_EQ(ib, 8);
  for (const auto& port : *p) {
    EXPECT_TRUE(port.active());
    EXPECT_EQ(port.ca_type, "MT4126");
    if (!port.roce()) {
      EXPECT_EQ(port.rate_gbps, 200);
    }
  }
}

TEST(Ibstat, SpacesInsteadOfTabsAndDownPorts) {
  auto p = parse_ibstat(data("ibstat_h100_cx7_ib400_spaces.txt"));
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->size(), 9u);
  EXPECT_EQ((*p)[0].device, "mlx5_0");
  EXPECT_EQ((*p)[0].rate_gbps, 400);
  EXPECT_EQ((*p)[0].link_layer, "InfiniBand");
  EXPECT_EQ((*p)[2].device, "mlx5_4");
  auto d = parse_ibstat(data("ibstat_h100_cx7_some_down.txt"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size(), 12u);
  EXPECT_EQ(std::count_if(d->begin(), d->end(), [](const IbPort& x) { return x.state == "Down"; }), 3);
}

TEST(IbvDevinfo, RocePort) {
  auto p = parse_ibv_devinfo(data("ibv_devinfo_h100_cx7_roce.txt"));
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ((*p)[0].device, "mlx5_0");
  EXPECT_EQ((*p)[0].state, "Active");
  EXPECT_TRUE((*p)[0].roce());
  EXPECT_EQ((*p)[0].ca_type, "4129");
}

TEST(SysfsIb, ProbeListing) {
  auto p = parse_sysfs_ib_listing(
      "mlx5_0 1 4: ACTIVE|400 Gb/sec (4X NDR)|InfiniBand\n"
      "mlx5_1 1 1: DOWN|40 Gb/sec (4X QDR)|Ethernet\n");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 2u);
  EXPECT_TRUE((*p)[0].active());
  EXPECT_EQ((*p)[0].rate_gbps, 400);
  EXPECT_EQ((*p)[1].state, "Down");
  EXPECT_TRUE((*p)[1].roce());
}

TEST(NvlinkStatus, ActiveInactiveAndUnsupported) {
  auto a = parse_nvlink_status(data("nvlink_status_1xH100_18links.txt"));
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->gpus.size(), 1u);
  EXPECT_EQ(a->gpus[0].links_active, 18);
  EXPECT_DOUBLE_EQ(a->gpus[0].link_gbps, 26.562);
  auto b = parse_nvlink_status(data("nvlink_status_2xH100_pcie_bridge_inactive_spaces.txt"));
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->gpus.size(), 2u);
  EXPECT_EQ(b->gpus[1].links_active, 12);
  EXPECT_EQ(b->gpus[1].links_inactive, 6);
  auto c = parse_nvlink_status(data("nvlink_status_L40S_unsupported.txt"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->gpus[0].links_active, 0);
  EXPECT_EQ(c->message, "Device does not have or support Nvlink");
}

TEST(OsFacts, MeminfoAndOsRelease) {
  auto m = parse_meminfo("MemTotal:       16318412 kB\nMemFree: 1 kB\nMemAvailable:   12000000 kB\n");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->total_bytes, 16318412LL * 1024);
  EXPECT_EQ(m->available_bytes, 12000000LL * 1024);
  EXPECT_FALSE(parse_meminfo("nothing").ok());
  // A garbled size that would overflow bytes (found by fuzzing) is no MemTotal at all.
  EXPECT_FALSE(parse_meminfo("MemTotal: 1211111111111111111 kB\n").ok());
  EXPECT_EQ(parse_os_release("NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)");
}

// The probe script run on this machine, through the local node: the same parser as for SSH.
TEST(Probe, LocalMachine) {
  auto node = make_local_node();
  auto info = probe_node(*node);
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_GT(info->cpus, 0);
  EXPECT_GT(info->mem_total_bytes, 0);
  EXPECT_FALSE(info->hostname.empty());
  EXPECT_EQ(info->address, "127.0.0.1");
}

// Every recorded sample parses, by kind (file name prefix).
TEST(RecordedSamples, EveryFileParses) {
  const std::filesystem::path dir = std::filesystem::path(MESHWORK_TEST_DATA_DIR) / "gpu-cluster";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".md") continue;
    const std::string text = test::read_text(e.path());
    SCOPED_TRACE(name);
    ++files;
    if (name.rfind("topo_", 0) == 0) {
      auto m = parse_topo_matrix(text);
      ASSERT_TRUE(m.ok()) << m.error().message();
      EXPECT_FALSE(m->gpu_rows().empty());
      for (int g : m->gpu_rows()) EXPECT_EQ(m->links[g][g].kind, LinkKind::self);
    } else if (name.rfind("query_gpu_", 0) == 0) {
      auto g = parse_query_gpu_csv(text);
      ASSERT_TRUE(g.ok()) << g.error().message();
      EXPECT_FALSE(g->empty());
    } else if (name.rfind("smi_", 0) == 0) {
      auto s = parse_smi_table(text);
      ASSERT_TRUE(s.ok()) << s.error().message();
      EXPECT_FALSE(s->gpus.empty());
      EXPECT_FALSE(s->driver_version.empty());
      for (const auto& g : s->gpus) EXPECT_GT(g.memory_total_mib, 0);
    } else if (name.rfind("ibstat_", 0) == 0) {
      auto p = parse_ibstat(text);
      ASSERT_TRUE(p.ok()) << p.error().message();
      for (const auto& port : *p) EXPECT_FALSE(port.link_layer.empty());
    } else if (name.rfind("ibv_devinfo_", 0) == 0) {
      auto p = parse_ibv_devinfo(text);
      ASSERT_TRUE(p.ok()) << p.error().message();
      for (const auto& port : *p) EXPECT_FALSE(port.state.empty());
    } else if (name.rfind("nvlink_status_", 0) == 0) {
      auto s = parse_nvlink_status(text);
      ASSERT_TRUE(s.ok()) << s.error().message();
    } else {
      ADD_FAILURE() << "no parser for " << name;
    }
  }
  EXPECT_GE(files, 30);
}

}  // namespace
}  // namespace meshwork::remote
