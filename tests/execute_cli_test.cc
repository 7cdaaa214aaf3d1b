// `parallax execute` end to end: a tiny model trains on one rank, the same run under
// `mpirun -np 2` (data parallel) gives the same losses, and what is not executed yet is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>

#include "cli_support.h"

namespace parallax::testing::cli {
namespace {

// A model small enough for a few steps in well under a second.
std::string tiny_model(const ScratchDir& dir) {
  const std::string path = dir.file("tiny.json");
  std::ofstream(path) << R"({"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
    "head_dim": 16, "ffn_hidden": 172, "ffn_act": "swiglu", "vocab": 256})";
  return path;
}

// A profile --compare can predict fp32 on (CPU ranks train in fp32): the A100's with its fp32
// peak (datasheet: 19.5 TFLOPS).
std::string fp32_profile(const ScratchDir& dir) {
  std::ifstream in(std::string(PARALLAX_SOURCE_DIR) + "/hw_profiles/a100-sxm-80gb.json");
  Json profile = Json::parse(in);
  profile["name"] = "a100-fp32";
  profile["fp32_tflops"] = {{"value", 19.5}, {"source", "NVIDIA A100 datasheet, FP32"}};
  const std::string path = dir.file("a100-fp32.json");
  std::ofstream(path) << profile.dump();
  return path;
}

std::vector<double> losses_of(const std::string& json) {
  std::vector<double> out;
  const Json j = ParseOrFail(json, "execute --format json");
  if (j.is_object() && j.contains("losses"))
    for (const auto& l : j["losses"]) out.push_back(l.get<double>());
  return out;
}

CliRun mpirun2(const std::string& args, Streams streams = Streams::kStdoutOnly) {
  return MpiParallax(2, args, streams);
}

TEST(ExecuteCli, TinyModelTrainsFromTheUniformLoss) {
  ScratchDir dir;
  const CliRun r = Parallax("execute --model " + Quote(tiny_model(dir)) +
                                " --gbs 8 --seq 64 --steps 20 --lr 1e-2 --format json",
                            Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::vector<double> l = losses_of(r.out);
  ASSERT_EQ(l.size(), 20u) << r;
  // A freshly initialised model predicts nearly uniformly over 256 bytes: ln 256 = 5.545.
  EXPECT_NEAR(l.front(), std::log(256.0), 0.1);
  // Synthetic sequences are arithmetic: in 20 steps the last five losses average well below the
  // first (each step draws new sequences, so single steps are noisy).
  double tail = 0;
  for (size_t i = l.size() - 5; i < l.size(); ++i) tail += l[i] / 5;
  EXPECT_LT(tail, l.front() - 1.0) << r;
  const Json j = ParseOrFail(r.out, "execute");
  EXPECT_GT(j["step_time_s"].get<double>(), 0);
  EXPECT_GT(j["tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["peak_memory_gib"].get<double>(), 0);
  ASSERT_EQ(j["peak_memory_gib_per_step"].size(), 20u);
  EXPECT_DOUBLE_EQ(j["peak_memory_gib_per_step"].back().get<double>(),
                   j["peak_memory_gib"].get<double>());
}

TEST(ExecuteCli, ComparesEachOperatorWithItsPrediction) {
  ScratchDir dir;
  const std::string args = "execute --model " + Quote(tiny_model(dir)) +
                           " --gbs 4 --seq 64 --steps 3 --cluster " + Quote(fp32_profile(dir)) +
                           " --compare --op-times";
  CliRun r = Parallax(args + " --format json", Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "execute --op-times");
  ASSERT_TRUE(j.contains("op_times")) << r;
  const Json& t = j["op_times"];
  // The step closest to the median, after the first.
  EXPECT_GE(t["step"].get<int>(), 2);
  const double step_time = j["step_times_s"][t["step"].get<int>() - 1].get<double>();
  double measured = 0, predicted = 0;
  std::map<std::string, Json> by_op;
  for (const Json& op : t["ops"]) {
    by_op[op["op"].get<std::string>()] = op;
    EXPECT_GE(op["forward_s"].get<double>(), 0) << op;
    EXPECT_GE(op["backward_s"].get<double>(), 0) << op;
    measured += op["forward_s"].get<double>() + op["backward_s"].get<double>();
    predicted += op["predicted_forward_s"].get<double>() + op["predicted_backward_s"].get<double>();
  }
  // Every operator the tiny dense model runs was timed in both passes and predicted; it has no
  // experts.
  for (const char* name : {"qkv_proj", "attention", "out_proj", "mlp_gate_up", "activation",
                           "mlp_down", "norm", "logits", "cross_entropy"}) {
    ASSERT_TRUE(by_op.count(name)) << name;
    EXPECT_GT(by_op[name]["forward_s"].get<double>(), 0) << name;
    EXPECT_GT(by_op[name]["predicted_forward_s"].get<double>(), 0) << name;
    EXPECT_GT(by_op[name]["predicted_backward_s"].get<double>(), 0) << name;
  }
  EXPECT_GT(by_op["optimizer"]["forward_s"].get<double>(), 0);
  EXPECT_EQ(by_op["moe"]["forward_s"].get<double>(), 0);
  // One rank: nothing to communicate.
  EXPECT_EQ(by_op["communication"]["backward_s"].get<double>(), 0);
  EXPECT_EQ(by_op["communication"]["predicted_backward_s"].get<double>(), 0);
  // One rank: the spread over the ranks is this rank's operator time.
  EXPECT_DOUBLE_EQ(t["ranks_min_s"].get<double>(), measured);
  EXPECT_DOUBLE_EQ(t["ranks_max_s"].get<double>(), measured);
  EXPECT_EQ(t["slowest_rank"].get<int>(), 0);
  // The operators and the rest make up the step, measured and predicted.
  EXPECT_NEAR(measured + t["rest_s"].get<double>(), step_time, 1e-9 + 1e-6 * step_time);
  EXPECT_NEAR(predicted + t["predicted_rest_s"].get<double>(),
              j["predicted_step_time_s"].get<double>(), 1e-9);
  // The table names the operators beside their predictions.
  r = Parallax(args);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r, "by operator, rank 0 (ms); predicted for pipeline stage 0")) << r;
  EXPECT_TRUE(Has(r, "mlp_gate_up")) << r;
  EXPECT_TRUE(Has(r, "rest (copies, bookkeeping, idle)")) << r;
}

TEST(ExecuteCli, LearnsTheShippedPublicDomainText) {
  ScratchDir dir;
  const std::string text = std::string(PARALLAX_SOURCE_DIR) + "/examples/data/gettysburg.txt";
  const CliRun r = Parallax("execute --model " + Quote(tiny_model(dir)) + " --data " + Quote(text) +
                                " --gbs 8 --seq 64 --steps 15 --lr 1e-2 --format json",
                            Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::vector<double> l = losses_of(r.out);
  ASSERT_EQ(l.size(), 15u);
  // English bytes: far below the uniform 5.5 nats within a few steps (unigram statistics alone
  // give about 3).
  EXPECT_LT(l.back(), 3.5) << r;
  // A model whose vocabulary cannot hold bytes is refused, naming the file.
  std::ofstream(dir.file("small-vocab.json"))
      << R"({"name": "v64", "layers": 1, "hidden": 32, "heads": 2, "kv_heads": 2,
             "head_dim": 16, "ffn_hidden": 64, "ffn_act": "swiglu", "vocab": 64})";
  const CliRun bad = Parallax("execute --model " + Quote(dir.file("small-vocab.json")) +
                              " --data " + Quote(text) + " --gbs 2 --seq 16 --steps 1");
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_TRUE(Has(bad, "outside the model's vocabulary of 64")) << bad;
}

TEST(ExecuteCli, DataParallelOverMpiGivesTheSingleRankLosses) {
  if (!HaveMpirun()) GTEST_SKIP() << "no mpirun";
  ScratchDir dir;
  const std::string args = "execute --model " + Quote(tiny_model(dir)) +
                           " --gbs 4 --seq 32 --steps 5 --lr 3e-3 --format json";
  const CliRun one = Parallax(args, Streams::kStdoutOnly);
  ASSERT_EQ(one.exit_code, 0) << one;
  const CliRun two = mpirun2(args);
  if (two.exit_code != 0 && Has(mpirun2(args, Streams::kBoth), "this build has no MPI"))
    GTEST_SKIP() << "built without MPI";
  ASSERT_EQ(two.exit_code, 0) << mpirun2(args, Streams::kBoth);
  const std::vector<double> a = losses_of(one.out), b = losses_of(two.out);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u) << two;
  // The same sequences, summed in a different order: equal to fp32 round-off.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-4 * a[i]) << "step " << i + 1;
  EXPECT_EQ(ParseOrFail(two.out, "dp2")["ranks"], 2);
  // --op-times spans the ranks' operator time: the slowest rank is one of the two and its time
  // the most.
  const CliRun timed =
      mpirun2(args + " --op-times --compare --cluster " + Quote(fp32_profile(dir)));
  ASSERT_EQ(timed.exit_code, 0) << timed;
  const Json tj = ParseOrFail(timed.out, "dp2 --op-times");
  const Json& t = tj["op_times"];
  EXPECT_GT(t["ranks_min_s"].get<double>(), 0) << t;
  EXPECT_GE(t["ranks_max_s"].get<double>(), t["ranks_min_s"].get<double>()) << t;
  EXPECT_TRUE(t["slowest_rank"] == 0 || t["slowest_rank"] == 1) << t;
  // The gradient all-reduce after the backward is communication, measured and predicted; the
  // spread over the ranks leaves it out (it holds the waits for the slower rank).
  for (const Json& op : t["ops"])
    if (op["op"] == "communication") {
      EXPECT_GT(op["backward_s"].get<double>(), 0) << op;
      EXPECT_GT(op["predicted_backward_s"].get<double>(), 0) << op;
      double all = 0;
      for (const Json& o : t["ops"])
        all += o["forward_s"].get<double>() + o["backward_s"].get<double>();
      if (t["slowest_rank"] == 0) {
        EXPECT_DOUBLE_EQ(t["ranks_max_s"].get<double>(),
                         all - op["forward_s"].get<double>() - op["backward_s"].get<double>());
      }
    }
  // The prediction gives each rank a core: more ranks than the host's cores are not comparable,
  // and the comparison says so.
  EXPECT_EQ(tj.contains("note"), sysconf(_SC_NPROCESSORS_ONLN) < 2) << tj;
  const CliRun four =
      MpiParallax(4,
                  "execute --model " + Quote(tiny_model(dir)) +
                      " --gpus 4 --gbs 4 --seq 32 --steps 1 --format json --compare --cluster " +
                      Quote(fp32_profile(dir)),
                  Streams::kStdoutOnly);
  ASSERT_EQ(four.exit_code, 0) << four;
  const Json fj = ParseOrFail(four.out, "dp4 --compare");
  EXPECT_EQ(fj.contains("note"), sysconf(_SC_NPROCESSORS_ONLN) < 4) << fj;
  if (fj.contains("note")) {
    EXPECT_NE(fj["note"].get<std::string>().find("4 ranks share this host's"), std::string::npos);
    // A profile calibrated by 4 ranks time-sharing this host's cores is comparable.
    Json shared = Json::parse(std::ifstream(fp32_profile(dir)));
    shared["gpus_per_node"]["value"] = 4;
    shared["scale_up_domain"]["value"] = 4;
    shared["shared_processors"] = {{"value", sysconf(_SC_NPROCESSORS_ONLN)}, {"source", "test"}};
    const std::string path = dir.file("shared.json");
    std::ofstream(path) << shared.dump();
    const CliRun comparable = MpiParallax(
        4,
        "execute --model " + Quote(tiny_model(dir)) +
            " --gpus 4 --gbs 4 --seq 32 --steps 1 --format json --compare --cluster " + Quote(path),
        Streams::kStdoutOnly);
    ASSERT_EQ(comparable.exit_code, 0) << comparable;
    EXPECT_FALSE(ParseOrFail(comparable.out, "shared profile").contains("note")) << comparable;
  }
  // The distributed optimizer (ZeRO-1: Adam state sharded, gradients reduce-scattered,
  // parameters all-gathered) follows the same curve.
  const CliRun zero = mpirun2(args + " --zero 1");
  ASSERT_EQ(zero.exit_code, 0) << zero;
  const std::vector<double> c = losses_of(zero.out);
  ASSERT_EQ(c.size(), 5u) << zero;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(c[i], a[i], 1e-4 * a[i]) << "step " << i + 1;
  // A plan for another number of ranks: the ranks say so and the job ends. mpirun aborts the
  // job when the first rank exits, so the other rank may be killed before it writes: each line
  // that does appear is whole, and rank 1's names it.
  const CliRun wrong =
      mpirun2("execute --model " + Quote(tiny_model(dir)) + " --gpus 4", Streams::kBoth);
  EXPECT_NE(wrong.exit_code, 0) << wrong;
  const std::string message = "--gpus: the plan has 4 ranks (tp*pp*dp*cp), the job 2";
  EXPECT_TRUE(Has(wrong, "error: " + message) || Has(wrong, "error: rank 1: " + message)) << wrong;
  size_t lines = 0;
  for (size_t at = wrong.out.find(message); at != std::string::npos;
       at = wrong.out.find(message, at + 1))
    ++lines;
  if (lines == 2) {
    EXPECT_TRUE(Has(wrong, "error: rank 1: " + message)) << wrong;
  }
}

// Runs `args` on `ranks` MPI ranks and expects the losses `want`, to fp32 round-off.
void ExpectLosses(const std::vector<double>& want, int ranks, const std::string& args) {
  const CliRun r = MpiParallax(ranks, args, Streams::kStdoutOnly);
  ASSERT_EQ(r.exit_code, 0) << MpiParallax(ranks, args, Streams::kBoth);
  const std::vector<double> got = losses_of(r.out);
  ASSERT_EQ(got.size(), want.size()) << r;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4 * want[i]) << args << ", step " << i + 1;
}

// Under expert parallelism the timed run reports how unevenly its router loaded the ranks (the
// busiest rank's routed copies over the mean: between 1 and ep) and predicts the step again
// with that imbalance, which can only slow it.
TEST(ExecuteCli, ExpertParallelRunsReportTheirRoutingAndPredictWithIt) {
  if (!HaveMpirun()) GTEST_SKIP() << "no mpirun";
  ScratchDir dir;
  std::ofstream(dir.file("moe.json"))
      << R"({"name": "moe", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
             "head_dim": 16, "ffn_hidden": 172, "ffn_act": "swiglu", "vocab": 256,
             "moe": {"experts": 4, "top_k": 2, "expert_ffn_hidden": 64, "dense_layers": 1}})";
  const std::string args = "execute --model " + Quote(dir.file("moe.json")) +
                           " --gbs 4 --seq 32 --steps 3 --gpus 2 --ep 2 --cluster " +
                           Quote(fp32_profile(dir)) + " --compare --op-times";
  const CliRun probe = mpirun2(args + " --steps 1", Streams::kBoth);
  if (probe.exit_code != 0 && Has(probe, "this build has no MPI"))
    GTEST_SKIP() << "built without MPI";
  const CliRun r = mpirun2(args + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r;
  const Json j = ParseOrFail(r.out, "execute --ep 2 --op-times");
  ASSERT_TRUE(j.contains("moe_imbalance")) << r;
  const double imbalance = j["moe_imbalance"].get<double>();
  EXPECT_GE(imbalance, 1.0);
  EXPECT_LE(imbalance, 2.0);
  EXPECT_GE(j["predicted_step_time_s_with_routing"].get<double>(),
            j["predicted_step_time_s"].get<double>());
  const CliRun table = mpirun2(args);
  ASSERT_EQ(table.exit_code, 0) << table;
  EXPECT_TRUE(Has(table, "routing: the busiest expert-parallel rank got")) << table;
  // Without expert parallelism there is no routing over ranks to report.
  const CliRun dp = mpirun2(args.substr(0, args.find(" --ep 2")) + " --cluster " +
                            Quote(fp32_profile(dir)) + " --compare --op-times --format json");
  ASSERT_EQ(dp.exit_code, 0) << dp;
  EXPECT_FALSE(ParseOrFail(dp.out, "execute --op-times").contains("moe_imbalance")) << dp;
}

// Gradients larger than one reduction piece (executor/mpi_pieces.h; tiny-llama's are 12 MB)
// are all-reduced and reduce-scattered in pieces, with the single-rank losses.
TEST(ExecuteCli, LargeGradientsReduceInPiecesWithTheSameLosses) {
  if (!HaveMpirun()) GTEST_SKIP() << "no mpirun";
  const std::string args = "execute --model " +
                           Quote(std::string(PARALLAX_SOURCE_DIR) + "/examples/tiny-llama.json") +
                           " --gbs 4 --seq 32 --steps 3 --format json";
  const CliRun probe = mpirun2(args + " --steps 1 --gpus 2", Streams::kBoth);
  if (probe.exit_code != 0 && Has(probe, "this build has no MPI"))
    GTEST_SKIP() << "built without MPI";
  const CliRun one = Parallax(args, Streams::kStdoutOnly);
  ASSERT_EQ(one.exit_code, 0) << one;
  const std::vector<double> a = losses_of(one.out);
  ASSERT_EQ(a.size(), 3u);
  ExpectLosses(a, 2, args + " --gpus 2");           // all-reduce
  ExpectLosses(a, 2, args + " --gpus 2 --zero 2");  // reduce-scatter, equal blocks
  ExpectLosses(a, 2, args + " --gpus 2 --fsdp --zero 0");
}

// Tensor parallelism (Megatron's column/row-parallel blocks, one all-reduce per block each way),
// pipeline parallelism (the simulator's 1F1B and interleaved schedules, run for real), context
// parallelism (K, V all-gathered, their gradients reduce-scattered) and their products with each
// other and with data parallelism follow the single-rank curve.
TEST(ExecuteCli, EveryLayoutGivesTheSingleRankLosses) {
  if (!HaveMpirun()) GTEST_SKIP() << "no mpirun";
  ScratchDir dir;
  const std::string args = "execute --model " + Quote(tiny_model(dir)) +
                           " --gbs 4 --seq 32 --steps 20 --lr 3e-3 --format json";
  const CliRun probe = mpirun2(args + " --steps 1", Streams::kBoth);
  if (probe.exit_code != 0 && Has(probe, "this build has no MPI"))
    GTEST_SKIP() << "built without MPI";
  const CliRun one = Parallax(args, Streams::kStdoutOnly);
  ASSERT_EQ(one.exit_code, 0) << one;
  const std::vector<double> a = losses_of(one.out);
  ASSERT_EQ(a.size(), 20u);
  ExpectLosses(a, 2, args + " --gpus 2 --tp 2");
  ExpectLosses(a, 4, args + " --gpus 4 --tp 2 --zero 1");  // dp2 x tp2, distributed optimizer
  ExpectLosses(a, 2, args + " --gpus 2 --pp 2");
  ExpectLosses(a, 4, args + " --gpus 4 --tp 2 --pp 2");
  ExpectLosses(a, 2, args + " --gpus 2 --cp 2");
  ExpectLosses(a, 4, args + " --gpus 4 --cp 2 --pp 2 --zero 1");
  // ZeRO-2 (gradients reduce-scattered after each backward), ZeRO-3 and FSDP (parameters
  // sharded at rest, gathered around each forward and backward).
  ExpectLosses(a, 2, args + " --gpus 2 --zero 2");
  ExpectLosses(a, 4, args + " --gpus 4 --zero 3 --pp 2");
  ExpectLosses(a, 4, args + " --gpus 4 --fsdp --zero 0 --tp 2");
  // Sequence parallelism: norms, embedding, loss and the stages' messages on each tp rank's
  // rows; all-gathers and reduce-scatters instead of all-reduces.
  ExpectLosses(a, 2, args + " --gpus 2 --tp 2 --sp 1");
  ExpectLosses(a, 4, args + " --gpus 4 --tp 2 --pp 2 --sp 1");
  ExpectLosses(a, 4, args + " --gpus 4 --tp 2 --cp 2 --sp 1 --zero 2");

  // Mixture of experts (router, top-2 of 4 experts, a shared expert, the load-balancing loss):
  // expert parallelism over the data-parallel ranks, alone and with tp, cp and pp.
  std::ofstream(dir.file("moe.json"))
      << R"({"name": "moe", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
             "head_dim": 16, "ffn_hidden": 172, "ffn_act": "swiglu", "vocab": 256,
             "moe": {"experts": 4, "top_k": 2, "expert_ffn_hidden": 64, "shared_experts": 1,
                     "dense_layers": 1}})";
  const std::string moe = "execute --model " + Quote(dir.file("moe.json")) +
                          " --gbs 4 --seq 32 --steps 20 --lr 3e-3 --format json";
  const CliRun m1 = Parallax(moe, Streams::kStdoutOnly);
  ASSERT_EQ(m1.exit_code, 0) << m1;
  const std::vector<double> e = losses_of(m1.out);
  ExpectLosses(e, 2, moe + " --gpus 2 --ep 2");
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --tp 2");
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --cp 2");
  // The distributed optimizer: dense state over the data group, experts' over the ranks holding
  // the same experts.
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --zero 1");
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --tp 2 --zero 1");
  // ZeRO-2/3 and FSDP the same way: each unit's dense gradients reduce-scattered (and its dense
  // parameters gathered) over the data group, its experts' over the ranks holding them.
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --zero 2");
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --zero 3");
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --fsdp --zero 0");
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --tp 2 --zero 3");
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 4 --zero 3");
  // Expert tensor parallelism: each expert split over the tp ranks.
  ExpectLosses(e, 2, moe + " --gpus 2 --tp 2 --etp 2");
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --tp 2 --etp 2 --zero 1");
  // Sequence parallelism: each tp rank routes its own rows (the router statistics summed over
  // tp), as Megatron requires for MoE with tp.
  ExpectLosses(e, 2, moe + " --gpus 2 --tp 2 --sp 1");
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --tp 2 --sp 1 --zero 1");
  // Split experts under sequence parallelism: the rows the tp ranks routed to an expert are
  // all-gathered over tp before its GEMMs and its partial outputs reduce-scattered back.
  ExpectLosses(e, 2, moe + " --gpus 2 --tp 2 --etp 2 --sp 1");
  ExpectLosses(e, 4, moe + " --gpus 4 --ep 2 --tp 2 --etp 2 --sp 1 --zero 1");
  ExpectLosses(e, 4, moe + " --gpus 4 --cp 2 --tp 2 --etp 2 --sp 1");  // statistics over tp, cp

  // A tied embedding split between the first and the last stage, interleaved.
  std::ofstream(dir.file("tied.json"))
      << R"({"name": "tied", "layers": 4, "hidden": 64, "heads": 4, "kv_heads": 2,
             "head_dim": 16, "ffn_hidden": 172, "ffn_act": "swiglu", "vocab": 256,
             "tied_embeddings": true})";
  const std::string tied = "execute --model " + Quote(dir.file("tied.json")) +
                           " --gbs 4 --seq 32 --steps 5 --format json";
  const CliRun t1 = Parallax(tied, Streams::kStdoutOnly);
  ASSERT_EQ(t1.exit_code, 0) << t1;
  ExpectLosses(losses_of(t1.out), 2, tied + " --gpus 2 --pp 2 --vpp 2 --schedule interleaved");
  ExpectLosses(losses_of(t1.out), 4, tied + " --gpus 4 --pp 2 --tp 2 --sp 1");
}

// The CUDA backend trains the same curve as one CPU rank where a GPU is present, and says why
// not where none is (or the build has no CUDA); a parallel layout is refused, not launched.
TEST(ExecuteCli, CudaBackendMatchesTheCpuOrSaysWhyNot) {
  ScratchDir dir;
  const std::string args = "execute --model " + Quote(tiny_model(dir)) +
                           " --gbs 4 --mbs 2 --seq 32 --steps 20 --lr 3e-3 --format json";
  const CliRun gpu = Parallax(args + " --backend cuda", Streams::kBoth);
  if (gpu.exit_code != 0) {
    EXPECT_EQ(gpu.exit_code, 2) << gpu;
    EXPECT_TRUE(Has(gpu, "cuda: ") || Has(gpu, "built without CUDA")) << gpu;
  } else {
    const CliRun cpu = Parallax(args, Streams::kStdoutOnly);
    ASSERT_EQ(cpu.exit_code, 0) << cpu;
    const std::vector<double> a = losses_of(cpu.out), b = losses_of(gpu.out);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-4 * a[i]) << "step " << i + 1;
  }
  const CliRun tp = Parallax(args + " --backend cuda --gpus 2 --tp 2", Streams::kBoth);
  EXPECT_EQ(tp.exit_code, 2) << tp;
  EXPECT_TRUE(Has(tp, "the CUDA backend runs one GPU")) << tp;
}

// --mode generate: greedy decoding of a trained checkpoint gives the same text on one rank, under
// tp2 and under pp2; times are reported.
TEST(ExecuteCli, GeneratesTheSameTextUnderTensorAndPipelineParallelism) {
  ScratchDir dir;
  const std::string text = std::string(PARALLAX_SOURCE_DIR) + "/examples/data/gettysburg.txt";
  const std::string model =
      " --model " + Quote(tiny_model(dir)) + " --checkpoint-dir " + Quote(dir.file("ckpt"));
  const CliRun train = Parallax("execute" + model + " --data " + Quote(text) +
                                " --gbs 8 --seq 64 --steps 10 --lr 1e-2 --save-every 10");
  ASSERT_EQ(train.exit_code, 0) << train;
  const std::string gen = "execute" + model +
                          " --mode generate --gbs 2 --max-new-tokens 16 "
                          "--format json";
  const CliRun one = Parallax(gen, Streams::kStdoutOnly);
  ASSERT_EQ(one.exit_code, 0) << one;
  const Json a = ParseOrFail(one.out, "generate");
  EXPECT_EQ(a["checkpoint_step"], 10);
  ASSERT_EQ(a["tokens"].size(), 2u);
  EXPECT_EQ(a["tokens"][0].size(), 16u);
  EXPECT_GT(a["ttft_s"].get<double>(), 0);
  EXPECT_GT(a["tpot_s"].get<double>(), 0);
  EXPECT_GT(a["tokens_per_s"].get<double>(), 0);
  // Another model's checkpoint is refused rather than loaded into tensors of the same sizes.
  const CliRun other = Parallax(
      "execute --model " + Quote(PARALLAX_SOURCE_DIR + std::string("/examples/tiny-llama.json")) +
      " --checkpoint-dir " + Quote(dir.file("ckpt")) + " --mode generate --max-new-tokens 2");
  EXPECT_EQ(other.exit_code, 2) << other;
  EXPECT_TRUE(Has(other, "the checkpoint holds another model")) << other;
  if (!HaveMpirun()) GTEST_SKIP() << "no mpirun";
  for (const char* layout : {" --gpus 2 --tp 2", " --gpus 2 --pp 2"}) {
    const CliRun r = mpirun2(gen + layout);
    if (r.exit_code != 0 && Has(mpirun2(gen + layout, Streams::kBoth), "this build has no MPI"))
      GTEST_SKIP() << "built without MPI";
    ASSERT_EQ(r.exit_code, 0) << mpirun2(gen + layout, Streams::kBoth);
    EXPECT_EQ(ParseOrFail(r.out, layout)["tokens"], a["tokens"]) << layout;
  }
  const CliRun dp = mpirun2(gen + " --gpus 2", Streams::kBoth);
  EXPECT_NE(dp.exit_code, 0);
  EXPECT_TRUE(Has(dp, "generation runs under tp and pp only")) << dp;
}

// A zoo model scaled down to what fits: proportions kept (head size, GQA grouping, vocabulary),
// and it trains.
TEST(ExecuteCli, FitScalesAZooModelDownToTheMemoryGiven) {
  CliRun r = Parallax("execute --model llama3.1-8b --fit-gib 8 --gbs 1 --seq 16 --steps 1");
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(Has(r,
                  "scaled llama3.1-8b to fit: 4 layers, hidden 512, 4 heads (1 KV) of 128, "
                  "MLP 1792, vocab 128256"))
      << r;
  EXPECT_TRUE(Has(r, "step    1  loss")) << r;
  // The vocabulary is kept, so a budget below the embedding's own need is refused.
  r = Parallax("execute --model llama3.1-8b --fit-gib 0.6 --gbs 1 --seq 16 --steps 1");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "scaled as far as its proportions allow")) << r;
}

TEST(ExecuteCli, WhatIsNotExecutedYetIsRefusedWithTheReason) {
  ScratchDir dir;
  const std::string model = " --model " + Quote(tiny_model(dir));
  CliRun r = Parallax("execute" + model + " --gpus 2 --ep 2 --etp 2 --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--etp: etp=2 must be 1 or tp=1")) << r;
  // ZeRO-2/3 shards each unit once: an embedding tied across two stages is held by both.
  std::ofstream(dir.file("tied.json"))
      << R"({"name": "tied", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
             "head_dim": 16, "ffn_hidden": 172, "ffn_act": "swiglu", "vocab": 256,
             "tied_embeddings": true})";
  r = Parallax("execute --model " + Quote(dir.file("tied.json")) +
               " --gpus 2 --pp 2 --zero 2 --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r,
                  "--zero: ZeRO-2/3 with a tied embedding split across pipeline stages is not "
                  "executed yet"))
      << r;
  std::ofstream(dir.file("moe.json"))
      << R"({"name": "moe", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
             "head_dim": 16, "ffn_hidden": 172, "ffn_act": "swiglu", "vocab": 256,
             "moe": {"experts": 4, "top_k": 2, "expert_ffn_hidden": 63, "dense_layers": 1}})";
  r = Parallax("execute --model " + Quote(dir.file("moe.json")) +
               " --gpus 2 --tp 2 --etp 2 --sp 1 --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r,
                  "--etp: etp=2 splits the experts: it needs a MoE model whose expert width "
                  "(63) it divides"))
      << r;
  r = Parallax("execute" + model + " --gpus 3 --cp 3 --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--cp: 2 * cp = 6 must divide the sequence length 32")) << r;
  // Tensor parallelism splits whole KV heads (tiny has 2).
  r = Parallax("execute" + model + " --gpus 4 --tp 4 --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--tp: tp=4 must divide kv_heads=2")) << r;
  r = Parallax("execute" + model + " --gpus 2 --tp 2 --sp 1 --gbs 4 --seq 31");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--sp: tp=2 must divide a microbatch's 31 tokens per rank")) << r;
  r = Parallax("execute" + model + " --gpus 4 --pp 4 --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--pp: 2 layers do not split evenly into pp * vpp = 4 stages")) << r;
  r = Parallax("execute" + model + " --gpus 2 --pp 2 --schedule zb-h1 --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "zero-bubble schedule is not executed yet")) << r;
  r = Parallax("execute" + model + " --gpus 2 --pp 2 --schedule dualpipe --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "DualPipe schedule is not executed yet")) << r;
  r = Parallax("execute --model deepseek-v3 --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "MLA")) << r;
  r = Parallax("execute" + model + " --gpus 2 --ep 2 --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--ep")) << r;
  r = Parallax("execute" + model + " --gpus 4 --gbs 4 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "mpirun -np 4")) << r;
  r = Parallax("execute");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "execute needs a model")) << r;
  r = Parallax("execute" + model + " --gbs 3 --mbs 2 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "--gbs")) << r;
  // A model too large for this machine is refused before anything is allocated.
  r = Parallax("execute --model llama3.1-70b --gbs 1 --seq 32");
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(Has(r, "GiB available")) << r;
}

}  // namespace
}  // namespace parallax::testing::cli
