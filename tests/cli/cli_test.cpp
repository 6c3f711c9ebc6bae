// End-to-end: the sinkstream binary as a user runs it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "cli_run.h"
#include "format/ggml_types.h"
#include "format/gguf.h"
#include "sample/gbnf_matcher.h"
#include "test_paths.h"
#include "util/thread_count.h"

namespace ss {
namespace {

using test::run;

TEST(Cli, GenerateGreedyMatchesLlama2cFromGgufAndBin) {
  const std::string dir = test::shared("models/stories260K/");
  const auto want = test::rtrim(test::read_file(dir + "expected_greedy_t0_n200.txt"));
  auto a = run("generate -m " + dir + "stories260K.gguf --temp 0 -n 200");
  EXPECT_EQ(a.rc, 0);
  EXPECT_EQ(test::rtrim(a.out), want);
  auto b = run("generate -m " + dir + "stories260K.bin -z " + dir + "tok512.bin --temp 0 -n 200 -t 2");
  EXPECT_EQ(b.rc, 0);
  EXPECT_EQ(test::rtrim(b.out), want);
}

// Without -t, a thread per physical core (as system-info reports and as
// util computes in this process), SINKSTREAM_THREADS over that, -t over
// both; the greedy text the same at each count.
TEST(Cli, ThreadsDefaultToPhysicalCoresTheEnvironmentAndTheFlagOverride) {
  const std::string bin = SS_CLI_BINARY;
  const char* saved = std::getenv("SINKSTREAM_THREADS");
  const std::string keep = saved ? saved : "";
  unsetenv("SINKSTREAM_THREADS");
  const int cores = default_thread_count().threads;
  if (saved) setenv("SINKSTREAM_THREADS", keep.c_str(), 1);
  auto info = run("env -u SINKSTREAM_THREADS " + bin + " system-info --json", false, true);
  ASSERT_EQ(info.rc, 0);
  EXPECT_EQ(nlohmann::json::parse(info.out)["default_threads"], cores) << info.out;

  const std::string dir = test::shared("models/stories260K/");
  const auto want = test::rtrim(test::read_file(dir + "expected_greedy_t0_n200.txt"));
  const std::string gen = " generate -m " + dir + "stories260K.gguf --temp 0 -n 200";
  for (const auto& [env, flag, threads] : {std::tuple{std::string("-u SINKSTREAM_THREADS"), std::string(""), cores},
                                           std::tuple{std::string("SINKSTREAM_THREADS=3"), std::string(""), 3},
                                           std::tuple{std::string("SINKSTREAM_THREADS=3"), std::string(" -t 2"), 2}}) {
    auto r = run("env " + env + " " + bin + gen + flag, true, true);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("| threads " + std::to_string(threads) + " |"), std::string::npos) << env << flag << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << env << flag;
  }
}

// -j / --jf (llama.cpp's flags): the answer after the prompt is JSON the
// schema accepts, and generation stops when the value closes; a schema
// the engine cannot honour is an error before any work.
TEST(Cli, GenerateJsonSchemaConstrainsTheAnswer) {
  const std::string dir = test::shared("models/stories260K/");
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"}},"required":["name","age"]})";
  int closed = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    auto r = run("generate -m " + dir + "stories260K.gguf -p 'Once upon a time' -n 120 --seed " + std::to_string(seed) +
                 " -j '" + schema + "'");
    ASSERT_EQ(r.rc, 0) << r.out;
    ASSERT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
    const auto v = nlohmann::json::parse(r.out.substr(16), nullptr, false);
    if (v.is_discarded()) continue;  // cut at -n
    ++closed;
    ASSERT_TRUE(v.is_object()) << r.out;
    EXPECT_EQ(v.size(), 2u) << r.out;
    EXPECT_TRUE(v["name"].is_string() && v["age"].is_number_integer()) << r.out;
  }
  EXPECT_GE(closed, 3);  // measured: 4 of 4
  auto bad = run("generate -m " + dir + "stories260K.gguf -j '{\"type\":\"string\",\"pattern\":\"a(?=b)\"}'", true);
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.out.find("'pattern': regex: lookarounds are not supported"), std::string::npos) << bad.out;
}

TEST(Cli, GenerateGrammarConstrainsTheAnswer) {
  const std::string model = test::shared("models/stories260K/stories260K.gguf");
  const std::string grammar = "# three words and a full stop\nroot ::= (\" \" word){3} \".\"\nword ::= [a-z]{1,10}\n";
  const std::string file = test::temp_path("three_words.gbnf");
  {
    std::ofstream f(file);
    f << grammar;
  }
  auto g = Gbnf::parse(grammar);
  ASSERT_TRUE(g.ok()) << g.error().message;
  for (int seed = 1; seed <= 3; ++seed) {
    auto r = run("generate -m " + model + " -p 'Once upon a time' -n 60 --temp 1 --seed " + std::to_string(seed) +
                 " --grammar-file " + file);
    ASSERT_EQ(r.rc, 0) << r.out;
    ASSERT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
    const std::string answer = r.out.substr(16, r.out.size() - 17);  // less the prompt and the last newline
    GbnfMatcher m(*g);
    EXPECT_TRUE(m.feed(answer) && m.complete()) << "'" << answer << "'";
  }
  auto bad = run("generate -m " + model + " --grammar 'root ::= \"a\" | b'", true);
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.out.find("rule 'b' is used but not defined"), std::string::npos) << bad.out;
  auto both = run("generate -m " + model + " --grammar 'root ::= \"a\"' -j '{}'", true);
  EXPECT_NE(both.rc, 0) << both.out;
}

TEST(Cli, GenerateLogitBiasBansAndFavoursTokens) {
  const std::string gen = "generate -m " + test::shared("models/stories260K/stories260K.gguf") + " --temp 0 -n 8 --ids";
  auto ids = [](const std::string& out) {
    std::vector<int> v;
    std::istringstream in(out);
    for (int id = 0; in >> id;) v.push_back(id);
    return v;
  };
  const auto plain = run(gen);
  ASSERT_EQ(plain.rc, 0) << plain.out;
  const auto greedy = ids(plain.out);
  ASSERT_EQ(greedy.size(), 8u) << plain.out;
  // llama.cpp's spelling: TOKEN_ID-inf never samples it; +BIAS favours it.
  const auto banned = run(gen + " -l " + std::to_string(greedy[0]) + "-inf");
  ASSERT_EQ(banned.rc, 0) << banned.out;
  const auto without = ids(banned.out);
  ASSERT_EQ(without.size(), 8u) << banned.out;
  EXPECT_EQ(std::count(without.begin(), without.end(), greedy[0]), 0) << banned.out;
  const auto favoured = ids(run(gen + " --logit-bias 261+30 -l 300-0.5").out);
  EXPECT_EQ(favoured, std::vector<int>(8, 261));
  for (const std::string bad : {"abc", "5", "512+1", "5+inf", "5+x"}) {
    auto r = run(gen + " --logit-bias=" + bad, true);
    EXPECT_NE(r.rc, 0) << bad;
    EXPECT_NE(r.out.find("--logit-bias '" + bad + "'"), std::string::npos) << r.out;
  }
}

TEST(Cli, GenerateIdsFromSafetensors) {
  const std::string dir = test::shared("models/tinystories-656k");
  auto r = run("generate -m " + dir + " --temp 0 -n 60 --ids --ignore-eos");
  EXPECT_EQ(r.rc, 0);
  std::string want;
  for (int32_t id : test::read_ids(dir + "/expected_greedy_ids_bos_60.txt")) want += std::to_string(id) + "\n";
  EXPECT_EQ(r.out, want);
}

TEST(Cli, PerplexityWritesGoldenCompatibleNll) {
  const std::string out = test::temp_path("nll_{policy}.txt");
  auto r = run("perplexity -m " + test::shared("models/stories260K/stories260K.gguf") + " --tokens-file " +
               test::shared("golden/stories260K/tokens.txt") +
               " --policy sinks:4:252 --policy window:256 --kv-type f32 --nll-out " + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const std::string name : {"sinks_4_252", "window_256"}) {
    const std::string path = test::temp_path("nll_" + name + ".txt");
    const auto got = test::read_nll(path);
    const auto want = test::read_nll(test::shared("golden/stories260K/nll_" + name + ".txt"));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-3) << name << " " << i;
    std::remove(path.c_str());
  }
}

TEST(Cli, BadInputGivesClearErrorsNotCrashes) {
  auto a = run("generate -m /nonexistent.gguf -n 3", true);
  EXPECT_EQ(a.rc, 1);
  EXPECT_NE(a.out.find("cannot open"), std::string::npos);
  auto b = run("generate -m " + test::shared("data/PROVENANCE.md") + " -n 3", true);
  EXPECT_EQ(b.rc, 1);
  EXPECT_NE(b.out.find("error:"), std::string::npos);
  const std::string m = " -m " + test::shared("models/stories260K/stories260K.gguf");
  auto c = run("generate --policy sinks:x:y -n 3" + m, true);
  EXPECT_EQ(c.rc, 1);
  EXPECT_NE(c.out.find("invalid policy"), std::string::npos);
  auto d = run("generate --temp -1 -n 3" + m, true);
  EXPECT_EQ(d.rc, 1);
  auto e = run("serve --policy h2o:4:20:8 --port 0" + m, true);
  EXPECT_EQ(e.rc, 1);
  EXPECT_NE(e.out.find("serve needs a streaming policy"), std::string::npos) << e.out;
  auto f = run("generate -n 3 --kv-type q8_0 --policy h2o:4:20:8" + m, true);  // 8-wide heads
  EXPECT_EQ(f.rc, 1);
  EXPECT_NE(f.out.find("heads a multiple of 32"), std::string::npos) << f.out;
}

// The kernel report follows the cap, whatever this machine is: a capped
// process names no kernel above its cap, and a bad cap is an error.
TEST(Cli, SystemInfoFollowsTheCpuCap) {
  auto info = [](const std::string& cap) {
    auto r =
        run((cap.empty() ? "" : "env SINKSTREAM_CPU=" + cap + " ") + std::string(SS_CLI_BINARY) + " system-info --json",
            false, /*raw=*/true);
    EXPECT_EQ(r.rc, 0) << cap;
    return nlohmann::json::parse(r.out);
  };
  const auto avx2 = info("avx2");
  EXPECT_EQ(avx2["cap"], "avx2");
  EXPECT_EQ(avx2["cap_from_env"], true);
  EXPECT_EQ(avx2["usable"].get<std::string>().find("AVX512"), std::string::npos);
  EXPECT_EQ(avx2["float_matmul"].get<std::string>().find("AVX3"), std::string::npos);
  EXPECT_NE(avx2["vector_ops"], "avx512");
  // AVX2 int8 kernels (Q4_0/Q8_0) on every x86-64 CPU this test can run on
  // with the cap at avx2 (the cap never raises what the CPU has).
  const std::string want2 = avx2["usable"].get<std::string>().find("AVX2") != std::string::npos ? "avx2" : "float";
  for (const char* k : {"int8_decode", "int8_batches", "fast_batches"}) EXPECT_EQ(avx2[k], want2) << k;
  // AVX-VNNI tiles under the avxvnni cap where the CPU has AVX-VNNI, and
  // the level below where it has not (the cap never raises what it has).
  const auto vnni = info("avxvnni");
  EXPECT_EQ(vnni["cap"], "avxvnni");
  EXPECT_EQ(vnni["usable"].get<std::string>().find("AVX512"), std::string::npos);
  EXPECT_EQ(vnni["vector_ops"], avx2["vector_ops"]);
  const std::string want_vnni =
      vnni["usable"].get<std::string>().find("AVX_VNNI") != std::string::npos ? "avx-vnni" : want2;
  for (const char* k : {"int8_decode", "int8_batches", "fast_batches"}) EXPECT_EQ(vnni[k], want_vnni) << k;
  const auto sse4 = info("sse4");
  EXPECT_EQ(sse4["vector_ops"], "baseline");
  EXPECT_EQ(sse4["float_matmul"].get<std::string>().find("AVX"), std::string::npos);
  const auto avx512 = info("avx512");
  EXPECT_NE(avx512["int8_batches"], "amx-int8");
  EXPECT_NE(avx512["fast_batches"], "amx-bf16");

  auto bad = run("env SINKSTREAM_CPU=avx3 " + std::string(SS_CLI_BINARY) + " system-info", true, /*raw=*/true);
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("SINKSTREAM_CPU=avx3: unknown CPU level"), std::string::npos) << bad.out;
  auto version = run("--version");
  EXPECT_EQ(version.rc, 0);
  EXPECT_EQ(version.out.rfind("sinkstream ", 0), 0u) << version.out;
  EXPECT_NE(version.out.find("system_info: cpu "), std::string::npos) << version.out;
  // Commands that load a model say which kernels they run, on stderr only.
  const std::string m = " -m " + test::shared("models/stories260K/stories260K.gguf");
  auto gen = run("generate -n 3 --temp 0" + m, true);
  EXPECT_NE(gen.out.find("system_info: cpu "), std::string::npos) << gen.out;
  EXPECT_EQ(run("generate -n 3 --temp 0" + m).out.find("system_info"), std::string::npos);
}

// Q4_0 decode's software prefetch and where Q5_K's and Q6_K's land: chosen
// per CPU (all by the same test for Zen 4), reported, overridable, and a
// value a knob does not know is an error, not a silent default.
TEST(Cli, SystemInfoReportsTheDecodePrefetchChoice) {
  auto info = [](const std::string& env) {
    auto r = run(env + std::string(SS_CLI_BINARY) + " system-info --json", false, /*raw=*/true);
    EXPECT_EQ(r.rc, 0) << env;
    return nlohmann::json::parse(r.out);
  };
  const auto def = info(
      "env -u SINKSTREAM_PREFETCH -u SINKSTREAM_PREFETCH_Q4K -u SINKSTREAM_PREFETCH_Q5K -u SINKSTREAM_PREFETCH_Q6K ");
  EXPECT_TRUE(def["decode_prefetch_from"] == "default" || def["decode_prefetch_from"] == "default for Zen 4")
      << def.dump();
  EXPECT_EQ(def["decode_prefetch"], def["decode_prefetch_from"] == "default" ? "software" : "hardware only");
  const auto on = info("env SINKSTREAM_PREFETCH=on "), off = info("env SINKSTREAM_PREFETCH=off ");
  EXPECT_EQ(on["decode_prefetch"], "software");
  EXPECT_EQ(off["decode_prefetch"], "hardware only");
  EXPECT_EQ(off["decode_prefetch_from"], "SINKSTREAM_PREFETCH");
  auto bad = run("env SINKSTREAM_PREFETCH=yes " + std::string(SS_CLI_BINARY) + " system-info", true, /*raw=*/true);
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("SINKSTREAM_PREFETCH=yes: expected on or off"), std::string::npos) << bad.out;

  // Q6_K: L2 on Zen 4 and on Intel with AMX (the CPU kind shows in the
  // Q4_K knob's source).
  const bool intel_amx = def["q4k_prefetch_from"] == "default for Intel with AMX";
  EXPECT_EQ(def["q6k_prefetch_from"], intel_amx ? def["q4k_prefetch_from"] : def["decode_prefetch_from"]) << def.dump();
  EXPECT_EQ(def["q6k_prefetch"], def["q6k_prefetch_from"] == "default" ? "L1" : "L2");
  const auto l1 = info("env SINKSTREAM_PREFETCH_Q6K=l1 "), l2 = info("env SINKSTREAM_PREFETCH_Q6K=l2 ");
  EXPECT_EQ(l1["q6k_prefetch"], "L1");
  EXPECT_EQ(l2["q6k_prefetch"], "L2");
  EXPECT_EQ(l2["q6k_prefetch_from"], "SINKSTREAM_PREFETCH_Q6K");
  EXPECT_EQ(l2["decode_prefetch"], def["decode_prefetch"]);  // one knob does not move the other
  bad = run("env SINKSTREAM_PREFETCH_Q6K=l3 " + std::string(SS_CLI_BINARY) + " system-info", true, /*raw=*/true);
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("SINKSTREAM_PREFETCH_Q6K=l3: expected l1 or l2"), std::string::npos) << bad.out;

  // Q5_K: L2 on Zen 4 and on Intel with AMX; Q4_K: L2 on Intel with AMX
  // only. The CPU kind shows in the other knobs' sources.
  EXPECT_TRUE(intel_amx || def["q4k_prefetch_from"] == "default") << def.dump();
  if (intel_amx) {
    EXPECT_EQ(def["decode_prefetch_from"], "default") << def.dump();
  }
  EXPECT_EQ(def["q4k_prefetch"], intel_amx ? "L2" : "L1");
  EXPECT_EQ(def["q5k_prefetch_from"], intel_amx ? def["q4k_prefetch_from"] : def["decode_prefetch_from"]) << def.dump();
  EXPECT_EQ(def["q5k_prefetch"], def["q5k_prefetch_from"] == "default" ? "L1" : "L2");
  for (const std::string knob : {"Q4K", "Q5K"}) {
    const std::string key = knob == "Q4K" ? "q4k_prefetch" : "q5k_prefetch";
    const std::string other = knob == "Q4K" ? "q5k_prefetch" : "q4k_prefetch";
    for (const char* target : {"l1", "l2"}) {
      const auto set = info("env SINKSTREAM_PREFETCH_" + knob + "=" + target + " ");
      EXPECT_EQ(set[key], std::string(target) == "l1" ? "L1" : "L2");
      EXPECT_EQ(set[key + "_from"], "SINKSTREAM_PREFETCH_" + knob);
      EXPECT_EQ(set["q6k_prefetch"], def["q6k_prefetch"]);  // each type's knob moves only its own choice
      EXPECT_EQ(set[other], def[other]);
    }
    bad = run("env SINKSTREAM_PREFETCH_" + knob + "=L2x " + std::string(SS_CLI_BINARY) + " system-info", true,
              /*raw=*/true);
    EXPECT_EQ(bad.rc, 1);
    EXPECT_NE(bad.out.find("SINKSTREAM_PREFETCH_" + knob + "=L2x: expected l1 or l2"), std::string::npos) << bad.out;
  }

  // Only the AVX-512 VNNI decode kernels follow the knobs: under a cap that
  // runs other kernels the report must not claim their prefetch.
  EXPECT_EQ(def["prefetch_followed"], def["int8_decode"] == "avx512-vnni") << def.dump();
  const std::string usable = def["usable"];
  for (const char* cap : {"sse4", "avx2"}) {
    if (std::string(cap) == "avx2" && usable.find("AVX2") == std::string::npos) continue;
    const std::string env = std::string("env SINKSTREAM_CPU=") + cap + " ";
    const auto capped = info(env);
    EXPECT_EQ(capped["int8_decode"], std::string(cap) == "sse4" ? "float" : "avx2") << capped.dump();
    EXPECT_EQ(capped["prefetch_followed"], false) << capped.dump();
    const auto text = run(env + std::string(SS_CLI_BINARY) + " system-info", false, /*raw=*/true);
    EXPECT_NE(text.out.find("the AVX-512 VNNI decode kernels follow these; the " +
                            capped["int8_decode"].get<std::string>() + " ones here prefetch their own way"),
              std::string::npos)
        << text.out;
  }
}

TEST(Cli, SinksGenerationRunsPastTheWindow) {
  // 600 tokens through a 4+60 cache: eviction happens many times.
  auto r = run("generate -m " + test::shared("models/stories260K/stories260K.gguf") +
               " --policy sinks:4:60 --chunk 16 --temp 0.8 --seed 3 -n 600 --ignore-eos --ids");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 600);
}

}  // namespace
}  // namespace ss

namespace ss {
namespace {

TEST(Cli, MakeModelWritesLoadableRealShapes) {
  // One layer of TinyLlama's shapes (2048 wide, GQA 32/4; a 512-token vocab
  // keeps ggml's K-quant search short) in a K-quant, and stories15M in Q4_0:
  // both load and generate. The same seed gives the same bytes: checked on
  // stories15M here and on the K-quant mix below (TinyLlama's layer is made
  // once: its K-quant search took 40 s a file under ASan).
  for (const auto& [args, twice] :
       {std::pair<std::string, bool>{"--shape tinyllama-1.1b --type q4_k --layers 1 --vocab 512", false},
        {"--shape stories15m --type q4_0", true}}) {
    const std::string a = test::temp_path("mm_a.gguf"), b = test::temp_path("mm_b.gguf");
    ASSERT_EQ(run("make-model " + args + " --seed 7 -o " + a).rc, 0) << args;
    if (twice) {
      ASSERT_EQ(run("make-model " + args + " --seed 7 -o " + b).rc, 0) << args;
      EXPECT_EQ(test::read_file(a), test::read_file(b));
      std::remove(b.c_str());
    }
    auto g = run("generate -m " + a + " --temp 0 -n 8 --ids --ignore-eos", true);
    EXPECT_EQ(g.rc, 0) << g.out;
    EXPECT_NE(g.out.find("decode 8 tok"), std::string::npos) << g.out;
    std::remove(a.c_str());
  }
  EXPECT_NE(run("make-model --shape stories15m --type q4_k -o /dev/null", true).out.find("does not fit"),
            std::string::npos);
  // q4_k_m: Q6_K for the output and, in llama.cpp's use_more_bits layers (of
  // 8: 0, 3, 6, 7), for attn_v and ffn_down; Q4_K elsewhere. It loads and runs.
  const std::string km = test::temp_path("mm_km.gguf"), km2 = test::temp_path("mm_km2.gguf");
  ASSERT_EQ(run("make-model --shape llama-tiny --type q4_k_m -o " + km).rc, 0);  // 8 layers, 256 wide
  ASSERT_EQ(run("make-model --shape llama-tiny --type q4_k_m -o " + km2).rc, 0);
  EXPECT_EQ(test::read_file(km), test::read_file(km2));
  std::remove(km2.c_str());
  auto f = GgufFile::open(km);
  ASSERT_TRUE(f.ok()) << f.error().message;
  std::map<std::string, uint32_t> type;
  for (const auto& t : f.value().tensors()) type[t.name] = t.raw_type;
  const auto q4k = static_cast<uint32_t>(GgmlType::Q4_K), q6k = static_cast<uint32_t>(GgmlType::Q6_K);
  EXPECT_EQ(type["output.weight"], q6k);
  EXPECT_EQ(type["token_embd.weight"], q4k);
  for (int l = 0; l < 8; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const uint32_t more = (l == 0 || l == 3 || l == 6 || l == 7) ? q6k : q4k;
    EXPECT_EQ(type[p + "attn_v.weight"], more) << l;
    EXPECT_EQ(type[p + "ffn_down.weight"], more) << l;
    EXPECT_EQ(type[p + "attn_q.weight"], q4k) << l;
    EXPECT_EQ(type[p + "ffn_up.weight"], q4k) << l;
  }
  std::map<std::string, std::string> ids;
  for (const char* aq : {"none", "int8"}) {
    auto g = run("generate -m " + km + " --temp 0 -n 4 --ids --ignore-eos --act-quant " + aq);
    EXPECT_EQ(g.rc, 0) << g.out;
    ids[aq] = g.out;
  }
  // int8 is the default for quantized weights (llama.cpp's arithmetic), said
  // on the system_info line; none stays the exact path, chosen by the flag.
  auto d = run("generate -m " + km + " --temp 0 -n 4 --ids --ignore-eos");
  EXPECT_EQ(d.out, ids["int8"]);
  EXPECT_NE(run("generate -m " + km + " --temp 0 -n 1 --ignore-eos", true).out.find("act-quant int8"),
            std::string::npos);
  std::remove(km.c_str());
  EXPECT_NE(run("make-model --shape nope -o /dev/null").rc, 0);
}

// Every architecture's shape: the file make-model writes loads, streams past
// its windows (sliding layers, sinks) and the same seed gives the same bytes.
// gpt-oss's experts are MXFP4 as in the released files.
TEST(Cli, MakeModelWritesEveryArchitecture) {
  for (const std::string args :
       {"--shape gpt-oss-tiny --type q8_0", "--shape gemma3-1b --type q4_0 --layers 1 --vocab 512",
        "--shape qwen3-0.6b --type q8_0 --layers 1 --vocab 512",
        "--shape pythia-160m --type f16 --layers 2 --vocab 512", "--shape phi-2 --type q4_0 --layers 1 --vocab 512",
        "--shape gemma2-2b --type q4_0 --layers 2 --vocab 512"}) {
    const std::string a = test::temp_path("arch_a.gguf"), b = test::temp_path("arch_b.gguf");
    ASSERT_EQ(run("make-model " + args + " --seed 3 -o " + a).rc, 0) << args;
    ASSERT_EQ(run("make-model " + args + " --seed 3 -o " + b).rc, 0) << args;
    EXPECT_EQ(test::read_file(a), test::read_file(b)) << args;
    auto g = run("generate -m " + a + " --policy sinks:2:14 --chunk 8 -n 40 --ids --ignore-eos -p hello", true);
    EXPECT_EQ(g.rc, 0) << args << "\n" << g.out;
    EXPECT_NE(g.out.find("decode 40 tok"), std::string::npos) << g.out;
    if (args.find("gpt-oss") != std::string::npos) {
      auto f = GgufFile::open(a);
      ASSERT_TRUE(f.ok());
      for (const auto& t : f.value().tensors()) {
        if (t.name.find("_exps.weight") != std::string::npos) {
          EXPECT_EQ(t.raw_type, static_cast<uint32_t>(GgmlType::MXFP4)) << t.name;
        }
      }
    }
    std::remove(a.c_str());
    std::remove(b.c_str());
  }
}

}  // namespace
}  // namespace ss

namespace ss {
namespace {

TEST(Cli, BenchPairsPositionsAndBatchesWithFastKernels) {
  // Alternating decode at two positions reports both tails and their ratio.
  const std::string m = " -m " + test::shared("models/stories260K/stories260K.gguf");
  auto r = run("bench" + m + " --policy sinks:4:60 --prefill 16 --positions 50 --samples 16 --pair 100,3000 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("\"p99_ratio\""), std::string::npos) << r.out;
  EXPECT_NE(run("bench" + m + " --policy sinks:4:60 --pair 100", true).out.find("two positions"), std::string::npos);
  EXPECT_NE(run("bench" + m + " --policy dense --pair 10,20", true).out.find("bounded policy"), std::string::npos);
  // Q4_0 batches through every --act-quant mode (fast: bf16 tiles where the
  // CPU has AMX-BF16, int8 otherwise).
  const std::string q = test::temp_path("bench_q4.gguf");
  ASSERT_EQ(run("make-model --shape stories15m --type q4_0 --seed 2 -o " + q).rc, 0);
  for (const std::string mode : {"none", "int8", "fast"}) {
    auto b = run("bench -m " + q + " --act-quant " + mode +
                     " --prefill 8 --positions 20 --samples 4 --batch 1,5 --batch-context 4 --json",
                 true);
    EXPECT_EQ(b.rc, 0) << mode << ": " << b.out;
    EXPECT_NE(b.out.find("\"aggregate_tok_s\""), std::string::npos) << mode;
  }
  // The bandwidth probe reads the weights where they lie (interleaved Q4_0
  // under int8: the same bytes as the file's), plainly, as two streams per
  // thread (with and without prefetch) and as four, and a fresh buffer; the
  // ceiling takes the fastest.
  auto bw = run("bench -m " + q + " --prefill 8 --positions 20 --samples 4 --bandwidth --json");
  ASSERT_EQ(bw.rc, 0) << bw.out;
  const auto j = nlohmann::json::parse(bw.out)["bandwidth"];
  EXPECT_GT(j["weights_read_bytes_per_s"].get<double>(), 1e8) << j;
  EXPECT_EQ(j["weights_read_bytes_per_s"].get<double>(),
            std::max({j["weights_plain_read_bytes_per_s"].get<double>(),
                      j["weights_two_stream_read_bytes_per_s"].get<double>(),
                      j["weights_two_bare_stream_read_bytes_per_s"].get<double>(),
                      j["weights_four_bare_stream_read_bytes_per_s"].get<double>()}))
      << j;
  EXPECT_GT(j["fresh_buffer_read_bytes_per_s"].get<double>(), 1e8) << j;
  EXPECT_EQ(j["read_bytes_per_s"].get<double>(),
            std::max(j["weights_read_bytes_per_s"].get<double>(), j["fresh_buffer_read_bytes_per_s"].get<double>()));
  // stories15m in Q4_0: 6 layers of 4 x 288x288 + 3 x 288x768, the 32000 x
  // 288 output, one embedding row; 18 bytes per 32 weights.
  const double q4_bytes = (6.0 * (4 * 288 * 288 + 3 * 288 * 768) + 32000.0 * 288 + 288) * 18 / 32;
  EXPECT_EQ(j["weight_bytes_per_token"].get<double>(), q4_bytes) << j;
  // The paired comparison: one sweep after each timed step (4 warm-up pairs
  // untimed), from the position the stream reached (20, then 4 timed
  // steps), its share the median of the pairs' sweep / step ratios.
  const auto& p = j["paired"];
  EXPECT_EQ(p["pairs"].get<int>(), 4) << p;
  EXPECT_EQ(p["position"].get<int64_t>(), 24) << p;
  EXPECT_GT(p["step_p50_ms"].get<double>(), 0) << p;
  EXPECT_GT(p["sweep_p50_ms"].get<double>(), 0) << p;
  EXPECT_GE(p["share_p90"].get<double>(), p["share_p50"].get<double>()) << p;
  EXPECT_GE(p["share_p50"].get<double>(), p["share_p10"].get<double>()) << p;
  EXPECT_GT(p["share_p10"].get<double>(), 0) << p;
  for (const char* k : {"step_p99_over_p50", "sweep_p99_over_p50"}) EXPECT_GE(p[k].get<double>(), 1.0) << k << p;
  // The host floor: one plain loop and one plain sweep over the weights after
  // each of --samples more steps, from where the stream reached (20, then 6
  // timed steps), all timed.
  auto hf = run("bench -m " + q + " --prefill 8 --positions 20 --samples 6 --host-floor --json");
  ASSERT_EQ(hf.rc, 0) << hf.out;
  const auto h = nlohmann::json::parse(hf.out)["host_floor"];
  EXPECT_EQ(h["pairs"].get<int>(), 6) << h;
  EXPECT_EQ(h["position"].get<int64_t>(), 26) << h;
  for (const char* k : {"step_p50_ms", "loop_p50_ms", "sweep_p50_ms"}) EXPECT_GT(h[k].get<double>(), 0) << k << h;
  for (const char* k : {"step_ratio", "loop_ratio", "sweep_ratio"}) EXPECT_GE(h[k].get<double>(), 1.0) << k << h;
  EXPECT_EQ(h["sweep_bytes"].get<double>(), j["weight_bytes_per_token"].get<double>()) << h;
  std::remove(q.c_str());
}

TEST(Cli, BenchBandwidthRefusesWeightsTooSmallToProbe) {
  // A llama2.c file whose every tensor is under the probe's 256-byte piece
  // (dim 4, vocab 8, one layer, shared classifier: 128 bytes at most): the
  // probe would time nothing, so --bandwidth is refused before any work
  // and the same bench without it runs.
  const test::TempPath f_file("bench_specks.bin"), z_file("bench_specks_tok.bin");
  const std::string &f = f_file.path, &z = z_file.path;
  const int32_t dim = 4, hidden = 4, layers = 1, heads = 1, kv = 1, vocab = 8, seq = 8;
  // embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, rope cos, rope sin
  const size_t floats = vocab * dim + dim + 4 * dim * dim + dim + 3 * hidden * dim + dim + 2 * seq * (dim / heads) / 2;
  std::vector<float> w(floats);
  for (size_t i = 0; i < floats; ++i) w[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
  FILE* out = std::fopen(f.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  for (int32_t h : {dim, hidden, layers, heads, kv, vocab, seq}) std::fwrite(&h, 4, 1, out);
  std::fwrite(w.data(), 4, w.size(), out);
  std::fclose(out);
  // Its llama2.c tokenizer: max token length, then score, length, bytes.
  out = std::fopen(z.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  const int32_t max_len = 5;
  std::fwrite(&max_len, 4, 1, out);
  for (const std::string t : {"<unk>", "<s>", "</s>", "a", "b", "c", " a", " b"}) {
    const float score = 0;
    const auto len = static_cast<int32_t>(t.size());
    std::fwrite(&score, 4, 1, out);
    std::fwrite(&len, 4, 1, out);
    std::fwrite(t.data(), 1, t.size(), out);
  }
  std::fclose(out);
  const std::string args = "bench -m " + f + " -z " + z + " --policy sinks:2:4 --prefill 2 --positions 3 --samples 2";
  auto plain = run(args, true);
  ASSERT_EQ(plain.rc, 0) << plain.out;
  auto bw = run(args + " --bandwidth", true);
  EXPECT_NE(bw.rc, 0) << bw.out;
  EXPECT_NE(bw.out.find("256-byte"), std::string::npos) << bw.out;
  EXPECT_EQ(bw.out.find("prefill"), std::string::npos) << "refused only after measuring:\n" << bw.out;
  // --host-floor still runs its loop there, and says it has no sweep.
  auto hf = run(args + " --host-floor", true);
  ASSERT_EQ(hf.rc, 0) << hf.out;
  EXPECT_NE(hf.out.find("no sweep (every weight tensor is under the probe's 256-byte piece)"), std::string::npos)
      << hf.out;
}

}  // namespace
}  // namespace ss
