// The toolbox a llama.cpp user reaches for: convert, quantize, tokenize,
// detokenize, run as the binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli_run.h"
#include "format/ggml_types.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "ggml_vocab_vectors.h"
#include "test_paths.h"

namespace ss {
namespace {

using test::run;

const std::string kHf = test::shared("models/tinystories-656k");

std::map<std::string, std::string> tensor_types(const std::string& path) {
  std::map<std::string, std::string> m;
  auto g = GgufFile::open(path);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  if (g.ok())
    for (const auto& t : g.value().tensors()) m[t.name] = type_name(t.raw_type);
  return m;
}

// convert keeps the weights (F32 stays F32), permutes q/k to GGUF's rope
// order and carries the tokenizer: greedy ids equal the HF directory's.
TEST(Toolbox, ConvertedHfModelGeneratesTheSameIds) {
  const std::string out = test::temp_path("ts656.gguf");
  auto c = run("convert " + kHf + " " + out, true);
  ASSERT_EQ(c.rc, 0) << c.out;
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g.value().get_string("general.architecture").value(), "llama");
  EXPECT_EQ(g.value().get_string("tokenizer.ggml.model").value(), "llama");
  EXPECT_EQ(g.value().opt_int("general.file_type"), 0);  // all F32
  const std::string gen = " --temp 0 -n 120 --ids --ignore-eos --act-quant none -p 'Tom and Sue went to the park.'";
  auto a = run("generate -m " + kHf + gen);
  auto b = run("generate -m " + out + gen);
  EXPECT_EQ(a.rc, 0);
  EXPECT_EQ(b.rc, 0);
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(a.out, b.out);
  // The whole dev text tokenizes the same through tokenizer.json and the GGUF's scores.
  const std::string text = test::shared("data/tinystories-valid-dev.txt");
  auto ta = run("tokenize --ids -m " + kHf + " -f " + text);
  auto tb = run("tokenize --ids -m " + out + " -f " + text);
  EXPECT_EQ(ta.rc, 0);
  EXPECT_GT(ta.out.size(), 10000u);
  EXPECT_EQ(ta.out, tb.out);
  std::filesystem::remove(out);
}

// A chat template given on the command line lands in llama.cpp's key.
TEST(Toolbox, ConvertEmbedsAChatTemplate) {
  const std::string tmpl = test::temp_path("tmpl.jinja"), out = test::temp_path("tmpl.gguf");
  {
    std::ofstream f(tmpl);
    f << "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}";
  }
  ASSERT_EQ(run("convert " + kHf + " " + out + " --outtype f16 --chat-template " + tmpl).rc, 0);
  auto g = GgufFile::open(out);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g.value().get_string("tokenizer.chat_template").value(),
            "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}");
  EXPECT_EQ(tensor_types(out)["blk.0.attn_q.weight"], "F16");
  EXPECT_EQ(tensor_types(out)["blk.0.attn_norm.weight"], "F32");
  std::filesystem::remove(out);
  std::filesystem::remove(tmpl);
}

// quantize follows llama.cpp's per-tensor choices on a real shape, and the
// file it writes loads and generates.
TEST(Toolbox, QuantizeAppliesLlamaCppMixesAndFallbacks) {
  const std::string f32 = test::temp_path("mix-f32.gguf"), q = test::temp_path("mix-q4km.gguf");
  ASSERT_EQ(run("make-model --shape stories15m --type f32 --layers 8 --vocab 512 -o " + f32).rc, 0);
  // stories15m's 288-wide rows do not fit 256: Q4_K falls back to Q5_0, Q6_K to Q8_0.
  auto r = run("quantize " + f32 + " " + q + " q4_k_m -t 2", true);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("do not fit Q4_K blocks of 256"), std::string::npos) << r.out;
  auto t = tensor_types(q);
  EXPECT_EQ(t["blk.1.attn_q.weight"], "Q5_0");
  EXPECT_EQ(t["blk.0.attn_v.weight"], "Q8_0");  // more bits: Q6_K, which falls back to Q8_0
  EXPECT_EQ(t["blk.3.attn_v.weight"], "Q8_0");  // (3 - 8/8) % 3 == 2: more bits
  EXPECT_EQ(t["blk.2.attn_v.weight"], "Q5_0");
  // ffn_down's rows are 768 wide: K-quants fit there.
  EXPECT_EQ(t["blk.3.ffn_down.weight"], "Q6_K");
  EXPECT_EQ(t["blk.4.ffn_down.weight"], "Q4_K");
  EXPECT_EQ(t["output.weight"], "Q8_0");
  EXPECT_EQ(t["output_norm.weight"], "F32");
  auto gen = run("generate -m " + q + " -n 8 --temp 0");
  EXPECT_EQ(gen.rc, 0);
  std::filesystem::remove(f32);
  std::filesystem::remove(q);
}

// 8 layers of 256-wide rows: K-quants fit everywhere, so the mix itself shows.
TEST(Toolbox, QuantizeKQuantsWhereRowsFit) {
  const std::string f16 = test::temp_path("k-f16.gguf"), q = test::temp_path("k-q4km.gguf"),
                    q8 = test::temp_path("k-q8.gguf");
  ASSERT_EQ(run("make-model --shape llama-tiny --type f16 -o " + f16).rc, 0);
  ASSERT_EQ(run("quantize " + f16 + " " + q + " Q4_K_M").rc, 0);
  auto t = tensor_types(q);
  // llama.cpp's use_more_bits for 8 layers: 0, 7, and 1 + 3k + 2 = 3, 6.
  for (int l = 0; l < 8; ++l) {
    const bool more = l == 0 || l == 7 || l == 3 || l == 6;
    EXPECT_EQ(t["blk." + std::to_string(l) + ".attn_v.weight"], more ? "Q6_K" : "Q4_K") << l;
    EXPECT_EQ(t["blk." + std::to_string(l) + ".ffn_down.weight"], more ? "Q6_K" : "Q4_K") << l;
    EXPECT_EQ(t["blk." + std::to_string(l) + ".attn_q.weight"], "Q4_K") << l;
  }
  EXPECT_EQ(t["output.weight"], "Q6_K");
  EXPECT_EQ(t["token_embd.weight"], "Q4_K");
  auto g = GgufFile::open(q);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g.value().opt_int("general.file_type"), 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  ASSERT_EQ(run("quantize " + f16 + " " + q8 + " q8_0").rc, 0);
  EXPECT_EQ(tensor_types(q8)["output.weight"], "Q8_0");
  // Quantized input is refused unless asked, and no partial file is left.
  const std::string again = test::temp_path("again.gguf");
  auto r = run("quantize " + q + " " + again + " q8_0", true);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--allow-requantize"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(again));
  EXPECT_TRUE(test::partial_files_of(again).empty());
  EXPECT_EQ(run("quantize " + q + " " + again + " q8_0 --allow-requantize").rc, 0);
  auto bad = run("quantize " + f16 + " " + again + " q3_k", true);
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.out.find("unknown type 'q3_k'"), std::string::npos) << bad.out;
  for (const auto& p : {f16, q, q8, again}) std::filesystem::remove(p);
}

// llama.cpp's own tokenizer vectors (test-tokenizer-0 for the Llama-2 SPM
// vocab), through the command line: ids as llama-tokenize --ids prints them.
TEST(Toolbox, TokenizeMatchesLlamaCppVectors) {
  const std::string dir = test::shared("models/llama2-tokenizer/");
  const auto vv =
      test::read_vocab_vectors(dir + "ggml-vocab-llama-spm.gguf.inp", dir + "ggml-vocab-llama-spm.gguf.out");
  const auto& cases = vv.cases;
  std::vector<std::string> expected;  // as `tokenize --ids` prints them
  for (const auto& ids : vv.ids) {
    std::string line;
    for (int32_t x : ids) line += (line.empty() ? "" : ", ") + std::to_string(x);
    expected.push_back("[" + line + "]\n");
  }
  ASSERT_FALSE(cases.empty());  // every case the files hold (46 here)
  ASSERT_EQ(expected.size(), cases.size());
  const std::string file = test::temp_path("case.txt");
  for (size_t i = 0; i < cases.size(); ++i) {
    {
      std::ofstream f(file, std::ios::binary);
      f << cases[i];
    }
    auto r = run("tokenize --ids --no-bos -z " + dir + "tokenizer.bin -f " + file);
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, expected[i]) << "case " << i << ": '" << cases[i] << "'";
  }
  std::filesystem::remove(file);
}

// A vocab-only byte-level GGUF (llama.cpp's ggml-vocab-*.gguf kind): GPT-2's
// byte symbols and <|endoftext|>, no tensors, no add_bos_token key.
std::string write_byte_level_vocab(const std::string& name, const std::string& pre) {
  std::vector<std::string> toks;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp =
        ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) ? b : 256 + extra++;
    std::string t;
    if (cp < 0x80) {
      t += static_cast<char>(cp);
    } else {
      t += static_cast<char>(0xC0 | (cp >> 6));
      t += static_cast<char>(0x80 | (cp & 0x3F));
    }
    toks.push_back(t);
  }
  toks.push_back("<|endoftext|>");
  std::vector<int32_t> types(toks.size(), 1);
  types.back() = 3;
  GgufWriter w;
  w.set_string("general.architecture", "gpt2");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_strings("tokenizer.ggml.tokens", toks);
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_strings("tokenizer.ggml.merges", {});
  w.set_u32("tokenizer.ggml.bos_token_id", 256);
  w.set_u32("tokenizer.ggml.eos_token_id", 256);
  const std::string path = test::temp_path(name);
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

// tokenize reads only the tokenizer of a GGUF (any architecture, no
// tensors), adds BOS only where the tokenizer does (GPT-2-style: not), and
// refuses a pre-tokenizer it does not implement rather than guess.
TEST(Toolbox, TokenizeReadsVocabOnlyFilesAsLlamaCppDoes) {
  const std::string ok = write_byte_level_vocab("vocab-gpt2.gguf", "gpt-2");
  auto r = run("tokenize --ids -m " + ok + " -p 'a1<|endoftext|>'");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "[97, 49, 256]\n");  // byte symbols of a and 1, the special; no BOS
  const std::string bad = write_byte_level_vocab("vocab-unknown.gguf", "no-such-pre");
  auto e = run("tokenize --ids -m " + bad + " -p 'a'", /*merge_stderr=*/true);
  EXPECT_NE(e.rc, 0);
  EXPECT_NE(e.out.find("unknown pre-tokenizer type 'no-such-pre'"), std::string::npos) << e.out;
  std::filesystem::remove(ok);
  std::filesystem::remove(bad);
}

TEST(Toolbox, TokenizePiecesCountsAndDetokenizeRoundTrip) {
  const std::string m = test::shared("models/stories260K/stories260K.gguf");
  auto r = run("tokenize -m " + m + " -p 'Once upon a time' --show-count");
  ASSERT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("     1 -> '<s>'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Total number of tokens: "), std::string::npos) << r.out;
  auto ids = run("tokenize --ids -m " + m + " -p 'Once upon a time, there was a cat.'");
  ASSERT_EQ(ids.rc, 0);
  auto d = run("detokenize -m " + m + " '" + test::rtrim(ids.out) + "'");
  EXPECT_EQ(d.rc, 0);
  EXPECT_EQ(d.out, "Once upon a time, there was a cat.\n");
  auto piped =
      run("sh -c \"echo '" + test::rtrim(ids.out) + "' | " + SS_CLI_BINARY + " detokenize -m " + m + "\"", false, true);
  EXPECT_EQ(piped.out, d.out);
  // A byte token <0x00> (id 3) mid-text: every byte comes out, the NUL and
  // what follows it included (as llama.cpp's llama_detokenize gives them).
  auto nul = run("detokenize -m " + m + " 336 438 3 389 81");
  EXPECT_EQ(nul.rc, 0);
  EXPECT_EQ(nul.out, std::string("saidL\0ouldN\n", 12)) << nul.out;
  for (const std::string bad : {"512", "-1", "abc", "99999999999999999999"}) {
    auto e = run("detokenize -m " + m + " 1 " + bad, true);
    EXPECT_EQ(e.rc, 1) << bad;
    EXPECT_NE(e.out.find("error: detokenize"), std::string::npos) << e.out;
  }
  auto none = run("tokenize -m " + m, true);
  EXPECT_EQ(none.rc, 1);
}

// llama.cpp's -f: the prompt from a file, the same as -p with its text.
TEST(Toolbox, GeneratePromptFromFile) {
  const std::string f = test::temp_path("prompt.txt"), m = test::shared("models/stories260K/stories260K.gguf");
  { std::ofstream(f) << "Once upon a time, a cat"; }
  auto a = run("generate -m " + m + " --temp 0 -n 20 --ids -f " + f);
  auto b = run("generate -m " + m + " --temp 0 -n 20 --ids -p 'Once upon a time, a cat'");
  EXPECT_EQ(a.rc, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(run("generate -m " + m + " -n 2 -f " + f + ".missing").rc, 1);
  std::filesystem::remove(f);
}

}  // namespace
}  // namespace ss
