// The flight record (core/flight_record.h, core/flight_layout.h): the binary layout read back
// from a real file, torn and garbage bytes refused with the file and the problem, the JSON both
// ways and its errors naming the field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/flight_layout.h"
#include "core/flight_record.h"

using namespace meshwork;

namespace {

FlightLayout sample_layout() {
  FlightLayout l;
  l.rank = 7;
  l.pid = 4242;
  l.step = 12;
  l.phase = static_cast<int32_t>(FlightPhase::backward);
  l.layer = 3;
  l.phase_since = 1765012345.25;
  l.activity = 1765012345.5;
  l.generation = 90;
  // 40 completed ops: the ring keeps the last 32, oldest first.
  for (int i = 1; i <= 40; ++i) {
    FlightOpSlot& s = l.ring[(l.completed++) % kFlightRing];
    s.group = static_cast<int32_t>(GroupKind::tp);
    s.op = static_cast<int32_t>(FlightOpKind::all_reduce);
    s.seq = i;
    s.bytes = 4096;
    s.enter = 1765012300.0 + i;
    s.exit = 1765012300.5 + i;
  }
  l.last_seq[static_cast<int>(GroupKind::tp)] = 40;
  l.in_collective = 1;
  l.current = {static_cast<int32_t>(GroupKind::dp_shard), static_cast<int32_t>(FlightOpKind::all_gather), 1234,
               1048576, 1765012345.5, 0};
  l.last_seq[static_cast<int>(GroupKind::dp_shard)] = 1234;
  l.last_seq[kFlightWorldSlot] = 2;
  return l;
}

std::string bytes_of(const FlightLayout& l) {
  return std::string(reinterpret_cast<const char*>(&l), sizeof l);
}

std::filesystem::path scratch_file(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("flight_record_test." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string json_error(void (*edit)(nlohmann::json&)) {
  FlightState s = *parse_flight_bytes(bytes_of(sample_layout()));
  nlohmann::json j = to_json(s);
  edit(j);
  auto r = flight_state_from_json(j);
  return r ? std::string("(no error)") : r.error().message();
}

}  // namespace

TEST(FlightRecord, FileRoundTrip) {
  const auto path = scratch_file(flight_file(7));
  EXPECT_EQ(flight_file(7), "flight-rank7.bin");
  write_file(path, bytes_of(sample_layout()));
  auto s = read_flight_file(path);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->rank, 7);
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->step, 12);
  EXPECT_EQ(s->phase, FlightPhase::backward);
  EXPECT_EQ(s->layer, 3);
  EXPECT_EQ(s->generation, 90u);
  ASSERT_TRUE(s->current.has_value());
  EXPECT_EQ(s->current->group.name(), "dp_shard");
  EXPECT_EQ(s->current->op, FlightOpKind::all_gather);
  EXPECT_EQ(s->current->seq, 1234);
  EXPECT_EQ(s->current->bytes, 1048576);
  ASSERT_EQ(s->recent.size(), static_cast<size_t>(kFlightRing));
  EXPECT_EQ(s->recent.front().seq, 9);  // 40 completed, the last 32 kept
  EXPECT_EQ(s->recent.back().seq, 40);
  EXPECT_EQ(s->last_seq_of(FlightGroup{false, GroupKind::dp_shard}), 1234);
  EXPECT_EQ(s->last_seq_of(FlightGroup{true, GroupKind::dp}), 2);
  EXPECT_FALSE(s->last_seq_of(FlightGroup{false, GroupKind::cp}).has_value());
  std::filesystem::remove_all(path.parent_path());
}

TEST(FlightRecord, JsonRoundTrip) {
  FlightState s = *parse_flight_bytes(bytes_of(sample_layout()));
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j.at("phase"), "backward");
  EXPECT_EQ(j.at("current").at("op"), "all_gather");
  EXPECT_FALSE(j.at("current").contains("exit"));
  EXPECT_EQ(j.at("last_seq").at("dp_shard"), 1234);
  auto back = flight_state_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(to_json(*back), j);
  // Without a current op and with unknown keys (ignored).
  nlohmann::json idle = j;
  idle.erase("current");
  idle["future"] = 1;
  auto r = flight_state_from_json(idle);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(r->current.has_value());
}

TEST(FlightRecord, NamesBothWays) {
  for (int i = 0; i <= static_cast<int>(FlightPhase::ended); ++i) {
    auto p = static_cast<FlightPhase>(i);
    EXPECT_EQ(flight_phase_from_name(to_string(p)), p);
  }
  for (int i = 0; i <= static_cast<int>(FlightOpKind::all_to_all); ++i) {
    auto op = static_cast<FlightOpKind>(i);
    EXPECT_EQ(flight_op_from_name(to_string(op)), op);
  }
  for (GroupKind k : kGroupKinds) EXPECT_EQ(flight_group_from_name(group_name(k)), (FlightGroup{false, k}));
  EXPECT_EQ(flight_group_from_name("world"), (FlightGroup{true, GroupKind::dp}));
  EXPECT_FALSE(flight_group_from_name("dp-shard").has_value());
  EXPECT_FALSE(flight_op_from_name("allreduce").has_value());
}

TEST(FlightRecord, TruncatedAndGarbageBytesAreRefused) {
  const std::string good = bytes_of(sample_layout());
  auto shorter = parse_flight_bytes(good.substr(0, good.size() - 1));
  ASSERT_FALSE(shorter.ok());
  EXPECT_NE(shorter.error().message().find("too short"), std::string::npos) << shorter.error().message();

  std::string garbage(good.size(), '\x5a');
  auto g = parse_flight_bytes(garbage);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message().find("not a meshtrain flight record"), std::string::npos);

  FlightLayout l = sample_layout();
  l.version = 99;
  EXPECT_NE(parse_flight_bytes(bytes_of(l)).error().message().find("version"), std::string::npos);
  l = sample_layout();
  l.phase = 42;
  EXPECT_NE(parse_flight_bytes(bytes_of(l)).error().message().find("phase: 42"), std::string::npos);
  l = sample_layout();
  l.current.group = 17;
  EXPECT_NE(parse_flight_bytes(bytes_of(l)).error().message().find("current.group: 17"), std::string::npos);
  l = sample_layout();
  l.ring[5].op = -3;
  EXPECT_NE(parse_flight_bytes(bytes_of(l)).error().message().find("recent[5].op: -3"), std::string::npos);

  // The file reader names the file.
  const auto path = scratch_file("flight-rank3.bin");
  write_file(path, good.substr(0, 100));
  auto f = read_flight_file(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message().find(path.string()), std::string::npos) << f.error().message();
  EXPECT_NE(f.error().message().find("too short"), std::string::npos) << f.error().message();
  write_file(path, garbage);
  f = read_flight_file(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message().find(path.string()), std::string::npos) << f.error().message();
  auto missing = read_flight_file(path.parent_path() / "flight-rank99.bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("flight-rank99.bin"), std::string::npos);
  std::filesystem::remove_all(path.parent_path());
}

TEST(FlightRecord, SnapshotWaitsOutAWriterInsideAnUpdate) {
  FlightLayout live = sample_layout();
  FlightLayout copy;
  flight_begin_write(live);  // odd: an update in progress
  EXPECT_FALSE(snapshot_flight(live, copy, 10));
  live.step = 13;
  flight_end_write(live);
  ASSERT_TRUE(snapshot_flight(live, copy, 10));
  EXPECT_EQ(copy.step, 13);
  EXPECT_EQ(copy.generation, 92u);
}

TEST(FlightRecord, BadJsonFieldsAreNamed) {
  EXPECT_EQ(json_error([](nlohmann::json& j) { j["phase"] = "lunch"; }),
            "phase: \"lunch\": one of startup, data, forward, backward, optimizer, checkpoint, eval, ended");
  EXPECT_NE(json_error([](nlohmann::json& j) { j["current"]["op"] = "allreduce"; }).find("current.op: \"allreduce\": one of all_reduce"),
            std::string::npos);
  EXPECT_NE(json_error([](nlohmann::json& j) { j["current"]["group"] = "dp-shard"; }).find("current.group"),
            std::string::npos);
  EXPECT_EQ(json_error([](nlohmann::json& j) { j["current"]["seq"] = 0; }),
            "current.seq: 0: a whole number from 1 to 9223372036854775807");
  EXPECT_EQ(json_error([](nlohmann::json& j) { j["recent"][2].erase("exit"); }), "recent[2].exit: (missing): unix seconds >= 0");
  EXPECT_EQ(json_error([](nlohmann::json& j) { j["last_seq"]["tp"] = -1; }), "last_seq.tp: -1: a whole number >= 1");
  EXPECT_EQ(json_error([](nlohmann::json& j) { j["last_seq"]["mars"] = 3; }).substr(0, 15), "last_seq: mars:");
  EXPECT_EQ(json_error([](nlohmann::json& j) { j.erase("rank"); }), "rank: (missing): a whole number");
  EXPECT_EQ(json_error([](nlohmann::json& j) { j["activity"] = "soon"; }), "activity: \"soon\": unix seconds >= 0");
  EXPECT_EQ(json_error([](nlohmann::json& j) { j = nlohmann::json::array(); }), "flight state: []: a JSON object");
}

TEST(FlightRecord, TheSparseMeshsGroupsHaveTheirOwnSlots) {
  FlightLayout l = sample_layout();
  const int ep_slot = flight_group_slot(FlightGroup{false, GroupKind::dp, ExpertGroupKind::ep});
  const int efsdp_slot = flight_group_slot(FlightGroup{false, GroupKind::dp, ExpertGroupKind::efsdp});
  EXPECT_EQ(ep_slot, kFlightWorldSlot + 1);
  EXPECT_EQ(efsdp_slot, kFlightWorldSlot + 2);
  EXPECT_EQ(kFlightGroupSlots, efsdp_slot + 1);
  for (int slot = 0; slot < kFlightGroupSlots; ++slot) EXPECT_EQ(flight_group_slot(flight_group_of_slot(slot)), slot);
  l.current = {ep_slot, static_cast<int32_t>(FlightOpKind::all_to_all), 7, 2048, 1765012345.5, 0};
  l.ring[(l.completed - 1) % kFlightRing].group = efsdp_slot;
  l.ring[(l.completed - 1) % kFlightRing].op = static_cast<int32_t>(FlightOpKind::all_gather);
  l.last_seq[ep_slot] = 7;
  l.last_seq[efsdp_slot] = 3;
  auto s = parse_flight_bytes(bytes_of(l));
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->current->group.name(), "ep");
  EXPECT_EQ(s->current->op, FlightOpKind::all_to_all);
  EXPECT_EQ(s->recent.back().group.name(), "efsdp");
  EXPECT_EQ(s->last_seq_of(FlightGroup{false, GroupKind::dp, ExpertGroupKind::ep}), 7);
  EXPECT_EQ(s->last_seq_of(FlightGroup{false, GroupKind::dp, ExpertGroupKind::efsdp}), 3);
  // A dense group of the same kind field is another group.
  EXPECT_NE((FlightGroup{false, GroupKind::dp, ExpertGroupKind::ep}), (FlightGroup{false, GroupKind::dp}));
  const nlohmann::json j = to_json(*s);
  EXPECT_EQ(j.at("current").at("group"), "ep");
  EXPECT_EQ(j.at("last_seq").at("efsdp"), 3);
  auto back = flight_state_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(to_json(*back), j);
  EXPECT_EQ(flight_group_from_name("ep"), (FlightGroup{false, GroupKind::dp, ExpertGroupKind::ep}));
  EXPECT_EQ(flight_group_from_name("efsdp"), (FlightGroup{false, GroupKind::dp, ExpertGroupKind::efsdp}));
  EXPECT_NE(json_error([](nlohmann::json& j) { j["current"]["group"] = "expert"; }).find("world, ep, efsdp"),
            std::string::npos);
}

TEST(FlightRecord, AVersionOneRecordIsStillRead) {
  // Version 1 ended last_seq after the world's slot: the same bytes, shorter.
  FlightLayout l = sample_layout();
  l.version = 1;
  const std::string v1 = bytes_of(l).substr(0, kFlightLayoutV1Size);
  auto s = parse_flight_bytes(v1);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->current->group.name(), "dp_shard");
  EXPECT_EQ(s->last_seq_of(FlightGroup{false, GroupKind::dp_shard}), 1234);
  EXPECT_EQ(s->last_seq.size(), 3u);  // tp, dp_shard, world
  const auto path = scratch_file("flight-rank1.bin");
  write_file(path, v1);
  auto f = read_flight_file(path);
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->rank, 7);
  EXPECT_EQ(f->recent.back().seq, 40);
  // Version 1 had no expert slots: one there is refused, naming the range of its version.
  l.current.group = kFlightWorldSlot + 1;
  auto bad = parse_flight_bytes(bytes_of(l).substr(0, kFlightLayoutV1Size));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("current.group: 9: a group index from 0 to 8"), std::string::npos)
      << bad.error().message();
  // A newer version than this reader knows says so.
  l = sample_layout();
  l.version = 3;
  auto newer = parse_flight_bytes(bytes_of(l));
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.error().message().find("flight record version: 3: must be 1 or 2"), std::string::npos)
      << newer.error().message();
  std::filesystem::remove_all(path.parent_path());
}
