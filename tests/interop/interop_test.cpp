// core/interop: the ecosystem's configs read with the values their authors meant, written so
// that they read back to the same plan, and refused (never written) where the tool would fail.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/interop/ecosystem_config.h"

namespace meshwork::interop {
namespace {

const std::filesystem::path kData = MESHWORK_INTEROP_DATA;

MeshShape shape(int rep, int shard, int cp, int tp) {
  MeshShape m;
  m[Axis::dp_replicate] = rep;
  m[Axis::dp_shard] = shard;
  m[Axis::cp] = cp;
  m[Axis::tp] = tp;
  return m;
}

bool lists(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

TEST(ImportExamples, AccelerateNdParallelConfig) {
  auto in = import_config(kData / "accelerate_tp_hsdp.yaml");
  ASSERT_TRUE(in.ok()) << in.error().message();
  EXPECT_EQ(in->format, ConfigFormat::accelerate);
  EXPECT_EQ(in->mesh, shape(2, 2, 1, 2));
  EXPECT_EQ(in->precision, Precision::bf16);
  EXPECT_EQ(in->activation_checkpointing, ActivationCheckpointing::full);
  EXPECT_EQ(in->num_processes, 8);
  EXPECT_EQ(in->num_machines, 1);
  EXPECT_TRUE(in->unknown_keys.empty()) << in->unknown_keys.front();
}

TEST(ImportExamples, AxolotlNdParallelConfig) {
  auto in = import_config(kData / "axolotl_nd_parallel.yaml");
  ASSERT_TRUE(in.ok()) << in.error().message();
  EXPECT_EQ(in->format, ConfigFormat::axolotl);
  EXPECT_EQ(in->model, "llama-3.1-8b");  // the hub id of a bundled preset plans without a download
  EXPECT_EQ(in->mesh, shape(1, 2, 2, 2));
  EXPECT_EQ(in->seq_len, 2048);
  EXPECT_EQ(in->micro_batch, 1);
  EXPECT_EQ(in->grad_accum_steps, 4);
  EXPECT_EQ(in->steps, 200);
  EXPECT_EQ(in->warmup_steps, 10);
  ASSERT_TRUE(in->lr.has_value());
  EXPECT_DOUBLE_EQ(*in->lr, 2e-5);
  EXPECT_EQ(in->precision, Precision::bf16);
  EXPECT_EQ(in->activation_checkpointing, ActivationCheckpointing::full);
  for (const char* key : {"datasets", "output_dir", "sample_packing", "optimizer", "flash_attention"})
    EXPECT_TRUE(lists(in->unknown_keys, key)) << key;
  EXPECT_FALSE(lists(in->unknown_keys, "dp_shard_size"));
  RunConfig config;
  in->apply_to(config);
  // global = micro 1 x accumulation 4 x dp (1 x 2)
  EXPECT_EQ(config.training.global_batch, 8);
  EXPECT_EQ(config.model, "llama-3.1-8b");
}

TEST(ImportExamples, TorchtitanLlama3_8B) {
  auto in = import_config(kData / "torchtitan_llama3_8b.toml");
  ASSERT_TRUE(in.ok()) << in.error().message();
  EXPECT_EQ(in->format, ConfigFormat::torchtitan);
  EXPECT_EQ(in->model, "llama-3.1-8b");
  EXPECT_EQ(in->mesh, shape(1, -1, 1, 1));  // data_parallel_shard_degree -1: the rest
  EXPECT_EQ(in->seq_len, 8192);
  EXPECT_EQ(in->micro_batch, 1);
  EXPECT_EQ(in->steps, 1000);
  EXPECT_EQ(in->warmup_steps, 200);
  ASSERT_TRUE(in->lr.has_value());
  EXPECT_DOUBLE_EQ(*in->lr, 3e-4);
  EXPECT_EQ(in->activation_checkpointing, ActivationCheckpointing::full);
  ASSERT_EQ(in->notes.size(), 1u);
  EXPECT_NE(in->notes[0].find("selective"), std::string::npos);
  for (const char* key : {"profiling", "metrics", "checkpoint", "compile", "optimizer.eps", "training.dataset"})
    EXPECT_TRUE(lists(in->unknown_keys, key)) << key;
  EXPECT_FALSE(lists(in->unknown_keys, "parallelism.tensor_parallel_degree"));
}

ExportRequest request(const MeshShape& mesh, int nodes, int per_node) {
  ExportRequest r;
  r.config.model = "llama-3.1-8b";
  r.config.mesh = mesh;
  TrainingConfig& t = r.config.training;
  t.seq_len = 4096;
  t.micro_batch = 2;
  t.global_batch = 2 * mesh[Axis::dp_replicate] * mesh[Axis::dp_shard] * 3;  // 3 accumulation steps
  t.lr = 1.5e-4;
  t.warmup_steps = 25;
  t.steps = 500;
  t.precision = Precision::bf16;
  t.activation_checkpointing = ActivationCheckpointing::full;
  t.device = DeviceKind::cuda;
  r.num_machines = nodes;
  r.processes_per_machine = per_node;
  r.main_address = "10.0.0.1";
  return r;
}

TEST(RoundTrip, EveryFormatReadsBackTheShapeAndTheSettingsItCarries) {
  const std::vector<MeshShape> shapes = {shape(1, 8, 1, 1), shape(2, 2, 1, 2), shape(1, 2, 2, 2),
                                         shape(4, 1, 1, 1), shape(1, 1, 1, 8), shape(2, 4, 2, 1)};
  for (ConfigFormat f : {ConfigFormat::accelerate, ConfigFormat::axolotl, ConfigFormat::torchtitan}) {
    for (const MeshShape& m : shapes) {
      SCOPED_TRACE(std::string(to_string(f)) + " " + m.to_string());
      const int world = static_cast<int>(m.world_size());
      const ExportRequest r = request(m, world >= 16 ? 2 : 1, world >= 16 ? world / 2 : world);
      auto out = export_config(r, f);
      ASSERT_TRUE(out.ok()) << out.error().message();
      EXPECT_EQ(out->launch_commands.size(), static_cast<size_t>(r.num_machines));
      EXPECT_NE(out->launch_commands.back().find("10.0.0.1"), std::string::npos);
      // The file name's extension and the keys are all the reader gets: it must find the format.
      auto in = import_config_text(out->text, std::string("exported.") + (f == ConfigFormat::torchtitan ? "toml" : "yaml"));
      ASSERT_TRUE(in.ok()) << in.error().message() << "\n" << out->text;
      EXPECT_EQ(in->format, f);
      EXPECT_EQ(in->mesh, m);
      EXPECT_EQ(in->precision, Precision::bf16);
      RunConfig back;
      in->apply_to(back);
      if (f != ConfigFormat::accelerate) {  // Accelerate's config holds no training settings
        EXPECT_EQ(back.training.seq_len, 4096);
        EXPECT_EQ(back.training.micro_batch, 2);
        EXPECT_EQ(back.training.global_batch, r.config.training.global_batch);
        EXPECT_DOUBLE_EQ(back.training.lr, 1.5e-4);
        EXPECT_EQ(back.training.warmup_steps, 25);
        EXPECT_EQ(back.training.steps, 500);
        EXPECT_EQ(back.training.activation_checkpointing, ActivationCheckpointing::full);
        EXPECT_TRUE(in->unknown_keys.empty() || f == ConfigFormat::torchtitan);
      } else {
        EXPECT_EQ(in->num_processes, world);
        EXPECT_EQ(in->num_machines, r.num_machines);
        EXPECT_TRUE(in->unknown_keys.empty()) << in->unknown_keys.front();
      }
      if (f != ConfigFormat::accelerate) {
        EXPECT_EQ(back.model, "llama-3.1-8b");
      }
      if (f == ConfigFormat::axolotl) {
        EXPECT_NE(out->text.find("base_model: \"meta-llama/Llama-3.1-8B\""), std::string::npos);
      }
    }
  }
}

TEST(LaunchLines, NameTheFileWrittenQuotedForTheShell) {
  ExportRequest r = request(shape(2, 4, 1, 2), 2, 8);
  auto by_default = export_config(r, ConfigFormat::accelerate);
  ASSERT_TRUE(by_default.ok());
  EXPECT_EQ(by_default->launch_commands[1],
            "accelerate launch --config_file accelerate_config.yaml --machine_rank 1 --main_process_ip 10.0.0.1 "
            "--main_process_port 29500 train.py");
  r.config_file = "/runs/exp-7/acc.yaml";
  EXPECT_EQ(export_config(r, ConfigFormat::accelerate)
                ->launch_commands[0]
                .rfind("accelerate launch --config_file /runs/exp-7/acc.yaml --machine_rank 0 ", 0),
            0u);
  EXPECT_EQ(export_config(r, ConfigFormat::axolotl)->launch_commands[1],
            "torchrun --nnodes 2 --nproc-per-node 8 --node-rank 1 --master-addr 10.0.0.1 --master-port 29500 "
            "-m axolotl.cli.train /runs/exp-7/acc.yaml");
  // torchtitan's TOML is for the releases that read one; the file says which.
  const auto titan = export_config(r, ConfigFormat::torchtitan);
  ASSERT_TRUE(titan.ok());
  EXPECT_NE(titan->text.find("# Written by Meshwork"), std::string::npos);
  EXPECT_NE(titan->text.find("torchtitan <= 0.2.x"), std::string::npos) << titan->text;
  // A name the shell would split or expand is quoted; a quote inside it survives.
  r.config_file = "my run's config.toml";
  const std::string line = export_config(r, ConfigFormat::torchtitan)->launch_commands[0];
  EXPECT_NE(line.find("--job.config_file 'my run'\\''s config.toml'"), std::string::npos) << line;
}

// A host name or a model path is data, wherever it lands: one argument to a real shell (nothing
// runs), one value of the written file (no key or comment added).
TEST(LaunchLines, AHostileHostNameOrModelPathStaysData) {
  const std::string host = "node0; touch pwned $(touch pwned2) `touch pwned3` #: x";
  ExportRequest r = request(shape(2, 4, 1, 2), 2, 8);
  r.main_address = host;
  r.config.model = "/data/my \"model\": x\n#: evil";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("meshwork-hostile-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (ConfigFormat f : {ConfigFormat::accelerate, ConfigFormat::axolotl, ConfigFormat::torchtitan}) {
    SCOPED_TRACE(std::string(to_string(f)));
    auto out = export_config(r, f);
    ASSERT_TRUE(out.ok()) << out.error().message();
    for (const std::string& line : out->launch_commands) {
      // The line's own words, printed one per line by a real shell instead of run.
      const std::string words = line.substr(line.find(' ') + 1);
      const std::filesystem::path script = dir / "words.sh";
      std::ofstream(script) << "cd '" << dir.string() << "' && printf '%s\\n' " << words << "\n";
      FILE* p = ::popen(("/bin/sh " + script.string()).c_str(), "r");
      ASSERT_NE(p, nullptr);
      std::vector<std::string> args;
      char buf[4096];
      while (std::fgets(buf, sizeof buf, p)) {
        std::string a(buf);
        if (!a.empty() && a.back() == '\n') a.pop_back();
        args.push_back(a);
      }
      ASSERT_EQ(::pclose(p), 0) << line;
      auto at = std::find_if(args.begin(), args.end(),
                             [](const std::string& a) { return a == "--main_process_ip" || a == "--master-addr"; });
      ASSERT_NE(at, args.end()) << line;
      ASSERT_NE(at + 1, args.end());
      EXPECT_EQ(*(at + 1), host) << line;
    }
    if (f != ConfigFormat::torchtitan) {
      auto in = import_config_text(out->text, "exported.yaml");
      ASSERT_TRUE(in.ok()) << in.error().message() << "\n" << out->text;
      EXPECT_TRUE(in->unknown_keys.empty()) << in->unknown_keys.front() << "\n" << out->text;
      if (f == ConfigFormat::axolotl) {
        ASSERT_TRUE(in->model.has_value());
        EXPECT_EQ(*in->model, "/data/my \"model\": x\n#: evil");
      }
    }
  }
  for (const char* f : {"pwned", "pwned2", "pwned3"}) EXPECT_FALSE(std::filesystem::exists(dir / f)) << f;
  std::filesystem::remove_all(dir);
}

TEST(Refusals, PureReplicationWithTpIsNeverWrittenForTheToolsThatCannotRunIt) {
  const ExportRequest tp = request(shape(4, 1, 1, 2), 1, 8);
  for (ConfigFormat f : {ConfigFormat::accelerate, ConfigFormat::axolotl, ConfigFormat::torchtitan}) {
    auto out = export_config(tp, f);
    ASSERT_FALSE(out.ok()) << to_string(f);
    EXPECT_EQ(out.error().field, "dp_shard");
    EXPECT_NE(out.error().allowed.find("shard instead"), std::string::npos);
  }
  // cp on pure replication: Accelerate refuses it, torchtitan shards over cp with FSDP.
  const ExportRequest cp = request(shape(4, 1, 2, 1), 1, 8);
  EXPECT_FALSE(export_config(cp, ConfigFormat::accelerate).ok());
  EXPECT_TRUE(export_config(cp, ConfigFormat::torchtitan).ok());
}

TEST(Refusals, ShapeMustMatchTheMachinesAndABatchThatDoesNotDivideIsNamed) {
  auto wrong_world = export_config(request(shape(1, 8, 1, 1), 2, 8), ConfigFormat::accelerate);
  ASSERT_FALSE(wrong_world.ok());
  EXPECT_EQ(wrong_world.error().field, "mesh");
  ExportRequest r = request(shape(1, 8, 1, 1), 1, 8);
  r.config.training.global_batch = 20;  // micro 2 x dp 8 = 16 does not divide 20
  auto batch = export_config(r, ConfigFormat::axolotl);
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.error().field, "training.global_batch");
  EXPECT_EQ(batch.error().value, "20");
}

TEST(MalformedFiles, ErrorsNameTheFileTheLineAndTheKey) {
  auto yaml_syntax = import_config_text("distributed_type: FSDP\nparallelism_config:\n  a: [1, 2\n", "bad.yaml");
  ASSERT_FALSE(yaml_syntax.ok());
  EXPECT_EQ(yaml_syntax.error().field.rfind("bad.yaml:", 0), 0u) << yaml_syntax.error().message();

  auto wrong_type = import_config_text("distributed_type: FSDP\nmixed_precision: bf16\nnum_processes: eight\n", "acc.yaml");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.error().field, "acc.yaml:3: num_processes");
  EXPECT_EQ(wrong_type.error().value, "eight");

  auto axis = import_config_text("base_model: x\ntensor_parallel_size: 0\n", "ax.yaml");
  ASSERT_FALSE(axis.ok());
  EXPECT_EQ(axis.error().field, "ax.yaml:2: tensor_parallel_size");

  auto toml_type = import_config_text("[parallelism]\ntensor_parallel_degree = \"two\"\n", "tt.toml");
  ASSERT_FALSE(toml_type.ok());
  EXPECT_EQ(toml_type.error().field, "tt.toml:2: parallelism.tensor_parallel_degree");

  auto toml_syntax = import_config_text("[training]\nsteps = = 3\n", "tt.toml");
  ASSERT_FALSE(toml_syntax.ok());
  EXPECT_EQ(toml_syntax.error().field, "tt.toml:2");

  auto pp = import_config_text("[parallelism]\npipeline_parallel_degree = 4\n", "pp.toml");
  ASSERT_FALSE(pp.ok());
  EXPECT_EQ(pp.error().field, "pp.toml:2: parallelism.pipeline_parallel_degree");

  auto product = import_config_text(
      "distributed_type: FSDP\nnum_processes: 8\nparallelism_config:\n  parallelism_config_dp_shard_size: 2\n"
      "  parallelism_config_tp_size: 2\n",
      "acc.yaml");
  ASSERT_FALSE(product.ok());
  EXPECT_NE(product.error().allowed.find("num_processes (8)"), std::string::npos);

  auto not_a_map = import_config_text("- a\n- b\n", "list.yaml");
  ASSERT_FALSE(not_a_map.ok());
  EXPECT_EQ(not_a_map.error().field, "list.yaml");

  auto missing = import_config(kData / "no-such-file.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::io);
}

TEST(MalformedFiles, UnknownKeysAreListedNeverFatal) {
  auto in = import_config_text("distributed_type: MULTI_CPU\nnum_processes: 4\nmy_own_key: 3\n"
                               "fsdp_config:\n  fsdp_something_new: 1\n",
                               "acc.yaml");
  ASSERT_TRUE(in.ok()) << in.error().message();
  EXPECT_TRUE(lists(in->unknown_keys, "my_own_key"));
  EXPECT_TRUE(lists(in->unknown_keys, "fsdp_config.fsdp_something_new"));
  EXPECT_EQ(in->device, DeviceKind::cpu);
  EXPECT_EQ(in->mesh, shape(4, 1, 1, 1));  // multi-device data parallelism: replicas
}

TEST(Formats, NamesParseAndBadOnesAreRefusedWithTheChoices) {
  EXPECT_EQ(*parse_config_format("torchtitan"), ConfigFormat::torchtitan);
  auto bad = parse_config_format("deepspeed");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "--export: deepspeed: accelerate, axolotl or torchtitan");
}

}  // namespace
}  // namespace meshwork::interop

namespace meshwork::interop {
namespace {

MeshShape with_ep(MeshShape m, int ep) {
  m.ep = ep;
  return m;
}

ExportRequest moe_request(const MeshShape& mesh) {
  ExportRequest r = request(mesh, 1, static_cast<int>(mesh.world_size()));
  r.config.model = "qwen3-30b-a3b";
  return r;
}

// torchtitan's expert_parallel_degree borrows from dp_shard x cp x tp as Meshwork's ep does: the
// shape goes out and comes back as it was, tp and cp included.
TEST(ExpertParallel, TorchtitanWritesAndReadsExpertParallelDegree) {
  for (const MeshShape& m : {with_ep(shape(1, 8, 1, 1), 8), with_ep(shape(1, 2, 1, 4), 8), with_ep(shape(2, 2, 2, 1), 4),
                             shape(1, 8, 1, 1)}) {
    SCOPED_TRACE(m.to_string());
    auto out = export_config(moe_request(m), ConfigFormat::torchtitan);
    ASSERT_TRUE(out.ok()) << out.error().message();
    EXPECT_NE(out->text.find("expert_parallel_degree = " + std::to_string(m.ep) + "\n"), std::string::npos) << out->text;
    auto in = import_config_text(out->text, "exported.toml");
    ASSERT_TRUE(in.ok()) << in.error().message();
    EXPECT_EQ(in->mesh, m);
    EXPECT_FALSE(lists(in->unknown_keys, "parallelism.expert_parallel_degree"));
  }
  auto etp = import_config_text("[parallelism]\ndata_parallel_shard_degree = 8\nexpert_parallel_degree = 4\n"
                                "expert_tensor_parallel_degree = 2\n", "titan.toml");
  ASSERT_TRUE(etp.ok()) << etp.error().message();
  EXPECT_EQ(etp->mesh->ep, 4);
  ASSERT_FALSE(etp->notes.empty());
  EXPECT_NE(etp->notes.back().find("expert_tensor_parallel_degree 2 planned as 1"), std::string::npos);
}

// Axolotl's ep is an axis beside dp_shard_size: Meshwork's dp_shard 8 with ep 4 is dp_shard_size 2
// and expert_parallel_size 4 with the plugin, and reads back as dp_shard 8, ep 4.
TEST(ExpertParallel, AxolotlPluginSizesRoundTrip) {
  const MeshShape m = with_ep(shape(1, 8, 1, 1), 4);
  auto out = export_config(moe_request(m), ConfigFormat::axolotl);
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_NE(out->text.find("expert_parallel_size: 4\n"), std::string::npos) << out->text;
  EXPECT_NE(out->text.find("dp_shard_size: 2\n"), std::string::npos) << out->text;
  EXPECT_NE(out->text.find("axolotl.integrations.expert_parallel.ExpertParallelPlugin"), std::string::npos);
  auto in = import_config_text(out->text, "exported.yaml");
  ASSERT_TRUE(in.ok()) << in.error().message();
  EXPECT_EQ(in->mesh, m);
  EXPECT_TRUE(in->unknown_keys.empty()) << in->unknown_keys.front();
}

// Where the tool cannot run the plan, the export says so instead of writing a wrong file.
TEST(ExpertParallel, RefusedWhereTheToolHasNoSuchShape) {
  auto accelerate = export_config(moe_request(with_ep(shape(1, 8, 1, 1), 8)), ConfigFormat::accelerate);
  ASSERT_FALSE(accelerate.ok());
  EXPECT_EQ(accelerate.error().field, "ep");
  EXPECT_NE(accelerate.error().allowed.find("has no expert parallel"), std::string::npos);
  EXPECT_TRUE(export_config(moe_request(shape(1, 8, 1, 1)), ConfigFormat::accelerate).ok());  // ep 1 is fine

  auto with_tp = export_config(moe_request(with_ep(shape(1, 4, 1, 2), 4)), ConfigFormat::axolotl);
  ASSERT_FALSE(with_tp.ok());
  EXPECT_NE(with_tp.error().allowed.find("refuses ep x tp"), std::string::npos);
  auto replicated = export_config(moe_request(with_ep(shape(2, 4, 1, 1), 4)), ConfigFormat::axolotl);
  ASSERT_FALSE(replicated.ok());
  EXPECT_NE(replicated.error().allowed.find("no replication"), std::string::npos);
  auto over_cp = export_config(moe_request(with_ep(shape(1, 2, 4, 1), 8)), ConfigFormat::axolotl);
  ASSERT_FALSE(over_cp.ok());
  EXPECT_NE(over_cp.error().allowed.find("out of dp_shard alone"), std::string::npos);
}

}  // namespace
}  // namespace meshwork::interop
