// Writes the seed corpora of the libFuzzer targets: small valid files, each written by saccade's own
// writers (16-bit safetensors and an f16 .npy too, and by hand a safetensors file of odd halves and a .npy
// of format 2.0, which saccade does not write), and the SentencePiece model the gpt target loads. Usage:
// fuzz_make_seeds <tests/fuzz/libfuzzer>; writes <dir>/corpus/<target>/ and <dir>/data/tokenizer.model (both
// committed; rerun after a format change).
#include <cstring>
#include <filesystem>
#include <fstream>

#include "autograd/functions/nn.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "examples/common/idx.h"
#include "examples/gpt/tokenizer.h"
#include "examples/gpt/training.h"
#include "nn/serialization.h"
#include "ops/creation.h"
#include "ops/io.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"
#include "tests/fuzz/libfuzzer/fuzz_finetune.h"
#include "tests/fuzz/libfuzzer/fuzz_gpt.h"
#ifdef SACCADE_FUZZ_HF
#include "tests/fuzz/libfuzzer/fuzz_hf.h"
#endif

using namespace saccade;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// A safetensors file from its JSON header and data bytes (the header padded to a multiple of 8).
std::string safetensors_bytes(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

nn::Metadata gpt_resume_metadata(examples::GPT& m, int64_t step) {
  nn::Metadata meta = m.config().to_metadata();
  meta["windows"] = std::to_string(step * fuzz::kTinyBatch);
  meta["dropout_seed"] = std::to_string(m.generator().seed());
  meta["dropout_offset"] = std::to_string(m.generator().offset());
  meta["best_bits_per_byte"] = step > 0 ? "3.25" : "inf";
  meta["window_seed"] = "0";
  meta["train_seconds"] = "1.5";
  meta["warmup_end_seconds"] = "0";
  return meta;
}

#ifdef SACCADE_FUZZ_HF
// The bytes of a safetensors file of `tensors` (saccade's writer, through a scratch file).
std::string safetensors_of(const nn::StateDict& tensors) {
  const std::string path = fuzz::scratch("seed.safetensors");
  nn::save_safetensors(tensors, path, {{"format", "pt"}});
  return fuzz::read_bytes(path);
}

// An hf_weights input: the flags byte, then the files cut by the separator (which none of them may hold).
void write_hf_weights(const std::string& path, uint8_t flags, const std::vector<std::string>& files) {
  std::string out(1, static_cast<char>(flags));
  for (size_t i = 0; i < files.size(); ++i) {
    SACCADE_CHECK(files[i].find(fuzz::kShardSeparator) == std::string::npos,
                  "fuzz_make_seeds: {}: file {} holds the separator", path, i);
    out += (i ? std::string(fuzz::kShardSeparator) : std::string()) + files[i];
  }
  write_text(path, out);
}

// The index of `shards` (tensor name -> kShardNames[shard]) as transformers writes it.
std::string hf_index(const std::vector<nn::StateDict>& shards) {
  std::string map;
  for (size_t i = 0; i < shards.size(); ++i)
    for (const auto& [k, t] : shards[i])
      map += fmt::format("{}\n    \"{}\": \"{}\"", map.empty() ? "" : ",", k, fuzz::kShardNames[i]);
  return fmt::format("{{\n  \"metadata\": {{\"total_size\": 0}},\n  \"weight_map\": {{{}\n  }}\n}}\n", map);
}

// hf_weights: the tiny models' checkpoints as transformers lays them out, one file or two shards, in each
// dtype on disk, with what a loader ignores or skips
void write_hf_weights_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  const auto p = [&](const char* name) { return (dir / name).string(); };
  using F = fuzz::HfWeightsFlags;
  nn::LlamaForCausalLM llama(fuzz::tiny_llama_config(false), 3);
  const nn::StateDict l = llama.state_dict();
  write_hf_weights(p("llama_single"), 0, {safetensors_of(l)});
  nn::StateDict first, second;  // embed_tokens and layer 0, then the rest, bf16 in the second shard
  for (const auto& [k, t] : l) {
    if (k.starts_with("model.embed_tokens") || k.starts_with("model.layers.0."))
      first.insert(k, t);
    else
      second.insert(k, t.to(DType::BFloat16));
  }
  write_hf_weights(p("llama_sharded"), F::kIndexed,
                   {hf_index({first, second}), safetensors_of(first), safetensors_of(second)});
  nn::LlamaForCausalLM tied(fuzz::tiny_llama_config(true), 4);
  nn::StateDict t16;  // f16 on disk, with the lm_head a tied checkpoint may still carry
  for (const auto& [k, t] : tied.state_dict()) t16.insert(k, t.to(DType::Float16));
  t16.insert("lm_head.weight", t16.at("model.embed_tokens.weight"));
  write_hf_weights(p("llama_tied_f16"), 2, {safetensors_of(t16)});
  fuzz::Conv1DModel conv;
  nn::StateDict c = hf::export_weights(conv, fuzz::Conv1DModel::table());
  c.insert("attn.bias", ops::ones({1, 1, 4, 4}, DType::Float32));
  write_hf_weights(p("conv1d"), 4, {safetensors_of(c)});
  write_hf_weights(p("conv1d_f32_into_bf16"), 6, {safetensors_of(c)});  // converted on load
  // refused: a wrong dtype, a wrong shape, a tensor in both shards (each leaves the module as it was)
  nn::StateDict wrong;
  for (const auto& [k, t] : c) wrong.insert(k, k == "attn.c_proj.bias" ? t.to(DType::Int64) : t);
  write_hf_weights(p("conv1d_i64_bias"), 4, {safetensors_of(wrong)});
  nn::LlamaConfig wider = fuzz::tiny_llama_config(false);
  wider.intermediate_size = 16;
  write_hf_weights(p("llama_wider_mlp"), 0, {safetensors_of(nn::LlamaForCausalLM(wider, 5).state_dict())});
  nn::StateDict both = second;
  both.insert("model.embed_tokens.weight", first.at("model.embed_tokens.weight"));
  write_hf_weights(p("llama_tensor_in_both_shards"), F::kIndexed,
                   {hf_index({first, second}), safetensors_of(first), safetensors_of(both)});
  nn::StateDict c1, c2;  // bf16, c_proj's weight in the second shard
  for (const auto& [k, t] : hf::export_weights(conv, fuzz::Conv1DModel::table(), DType::BFloat16))
    (k == "attn.c_proj.weight" ? c2 : c1).insert(k, t);
  c2.insert("extra", ops::zeros({2}, DType::Float32));  // skipped by the non-strict load
  write_hf_weights(p("conv1d_bf16_sharded_nonstrict"), F::kIndexed | 6 | F::kNonStrict,
                   {hf_index({c1, c2}), safetensors_of(c1), safetensors_of(c2)});
}
#endif

}  // namespace

int main(int argc, char** argv) {
  SACCADE_CHECK(argc == 2, "usage: fuzz_make_seeds <tests/fuzz/libfuzzer>");
  const fs::path root = argv[1], corpus = root / "corpus";
  for (const char* t : {"safetensors", "state_dict", "checkpoint", "npy", "idx", "cmudict", "fortunes", "gpt",
                        "finetune_run"})
    fs::create_directories(corpus / t);
  fs::create_directories(root / "data");
  const auto f = [&](const char* target, const char* name) { return (corpus / target / name).string(); };

  // safetensors: each dtype saccade writes, metadata, a 0-d and an empty tensor, no tensors at all, halves
  nn::StateDict all;
  all.insert("w", ops::arange(0, 6, 1, DType::Float32).reshape({2, 3}));
  all.insert("d", ops::full({2}, -1.5, DType::Float64));
  all.insert("i", ops::arange(0, 3, 1, DType::Int64));
  all.insert("b", ops::from_vector(std::vector<int64_t>{1, 0, 1}, {3}).to(DType::Bool));
  nn::save_safetensors(all, f("safetensors", "dtypes.safetensors"), {{"format", "pt"}, {"note", "seed"}});
  nn::StateDict odd;
  odd.insert("scalar", ops::full({}, 2.0, DType::Float32));
  odd.insert("empty", ops::zeros({0, 3}, DType::Float64));
  nn::save_safetensors(odd, f("safetensors", "scalar_empty.safetensors"));
  nn::save_safetensors({}, f("safetensors", "no_tensors.safetensors"), {{"k", "v"}});
  write_text(f("safetensors", "halves.safetensors"),
             safetensors_bytes(R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                               R"("g":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}})",
                               std::string("\x00\x3c\x00\xc0\x80\x3f\x80\x7f", 8)));

  nn::StateDict sixteen;  // bf16 and f16 as saccade's writer saves them (read as themselves)
  sixteen.insert("bf", all.at("w").to(DType::BFloat16));
  sixteen.insert("f", all.at("d").to(DType::Float16));
  nn::save_safetensors(sixteen, f("safetensors", "sixteen.safetensors"));

  // state_dict: the small model, in float32 and float64, and a checkpoint of it (optimizer keys ignored)
  fuzz::SmallModel small;
  nn::save(small, f("state_dict", "small.safetensors"));
  nn::StateDict wide;
  for (const auto& [k, t] : small.state_dict()) wide.insert(k, t.to(DType::Float64));
  nn::save_safetensors(wide, f("state_dict", "small_f64.safetensors"));
  nn::StateDict half;  // loaded into the float32 model converted, as a bf16 or f16 export would be
  for (const auto& [k, t] : small.state_dict())
    half.insert(k, t.to(k.starts_with("emb") ? DType::Float16 : DType::BFloat16));
  nn::save_safetensors(half, f("state_dict", "small_16bit.safetensors"));
  nn::AdamW small_opt(small.parameters());
  nn::save_checkpoint(f("state_dict", "small_checkpoint.safetensors"), small, small_opt, 0);

  // checkpoint and gpt: a tiny GPT before and after one AdamW step, as train_gpt saves it
  examples::GPT gpt(fuzz::tiny_gpt_config(), 1);
  nn::AdamW adamw({nn::ParamGroup{gpt.decayed_parameters(), std::nullopt, 0.1},
                   nn::ParamGroup{gpt.undecayed_parameters(), std::nullopt, 0.0}});
  nn::save_checkpoint(f("checkpoint", "step0.safetensors"), gpt, adamw, 0, gpt_resume_metadata(gpt, 0));
  nn::save(gpt, f("gpt", "byte.safetensors"), gpt.config().to_metadata());
  {
    Tensor x = ops::zeros({1, 2}, DType::Int64), y = ops::ones({2}, DType::Int64);
    Variable loss = cross_entropy(reshape(gpt.forward(x), {2, 8}), y);
    loss.backward();
    adamw.step();
  }
  nn::save_checkpoint(f("checkpoint", "step1.safetensors"), gpt, adamw, 1, gpt_resume_metadata(gpt, 1));
  nn::save_checkpoint(f("gpt", "last.safetensors"), gpt, adamw, 1, gpt_resume_metadata(gpt, 1));
  const std::string tok = (root / "data" / "tokenizer.model").string();
  std::string text;
  for (int i = 0; i < 40; ++i) text += "to be or not to be, that is the question\nthe rest is silence\n";
  examples::SentencePieceTokenizer::train(text, 300, tok);
  examples::GPTConfig bpe = fuzz::tiny_gpt_config();
  bpe.vocab_size = examples::SentencePieceTokenizer(tok).vocab_size(), bpe.tokenizer = "bpe";
  examples::GPT gpt_bpe(bpe, 2);
  nn::save(gpt_bpe, f("gpt", "bpe.safetensors"), bpe.to_metadata());

  // npy: each dtype, a 0-d and an empty array, and a format 2.0 header (4-byte length) by hand
  ops::save_npy(all.at("w"), f("npy", "f4.npy"));
  ops::save_npy(all.at("d"), f("npy", "f8.npy"));
  ops::save_npy(all.at("i"), f("npy", "i8.npy"));
  ops::save_npy(all.at("b"), f("npy", "b1.npy"));
  ops::save_npy(sixteen.at("f"), f("npy", "f2.npy"));  // '<f2' (numpy has no bfloat16)
  ops::save_npy(odd.at("scalar"), f("npy", "scalar.npy"));
  ops::save_npy(odd.at("empty"), f("npy", "empty.npy"));
  {
    std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
    h.append((64 - (12 + h.size() + 1) % 64) % 64, ' ');
    h += '\n';
    std::string bytes = std::string("\x93NUMPY\x02\x00", 8);
    uint32_t n = static_cast<uint32_t>(h.size());
    bytes.append(reinterpret_cast<const char*>(&n), 4);
    float one = 1.0f;
    write_text(f("npy", "v2.npy"), bytes + h + std::string(reinterpret_cast<const char*>(&one), 4));
  }

  // idx: labels (1-d) and images (3-d), gzip-compressed as Fashion-MNIST ships, and one plain file
  examples::write_idx_gz(f("idx", "labels-idx1-ubyte.gz"), {5}, {0, 1, 2, 9, 3});
  std::vector<uint8_t> pixels(2 * 3 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 14);
  examples::write_idx_gz(f("idx", "images-idx3-ubyte.gz"), {2, 3, 3}, pixels);
  write_text(f("idx", "plain-idx2-ubyte"),
             std::string("\x00\x00\x08\x02\x00\x00\x00\x02\x00\x00\x00\x02\x01\x02\x03\x04", 16));

  // cmudict: Festival's lexicon format, as festlex-cmu ships it
  write_text(
      f("cmudict", "cmudict.out"),
      "MNCL\n;; a comment\n"
      "(\"abandon\" nil (((ax) 0) ((b ae n) 1) ((d ax n) 0)))\n"
      "(\"read\" n (((r iy d) 1)))\n(\"read\" v (((r eh d) 1)))\n"
      "(\"o'brien\" nil (((ow) 0) ((b r ay) 1) ((ax n) 0)))\n(\"x-ray\" nil (((eh k s) 1) ((r ey) 1)))\n"
      "(\"2nd\" nil (((s eh) 1) ((k ax n d) 0)))\n");

  // fortunes: quotations between lines of "%", a duplicate and a blank piece
  write_text(f("fortunes", "fortunes"),
             "A fool and his money are soon parted.\n%\nTo be, or not to be.\n\t-- Hamlet\n%\n\n%\n"
             "A fool and his money are soon parted.\n%\n100% sure\n%");
  // finetune_run: gpt finetune's OUT/last.safetensors before the first step and after one
  {
    fuzz::FinetuneRun run;
    examples::save_run(f("finetune_run", "step0.safetensors"), run.model, run.opt, run.log, {}, run.opts,
                       fuzz::kFinetuneExamples);
    Tensor x = ops::from_vector(std::vector<int64_t>{1, 4}, {2});
    Variable loss = sum(run.model.fc->forward(run.model.norm->forward(run.model.emb->forward(x))));
    loss.backward();
    run.opt.step();
    run.gen.advance(64);
    run.log.train_loss = {1.5};
    run.log.val_loss = {{1, 1.25}};
    examples::save_run(f("finetune_run", "step1.safetensors"), run.model, run.opt, run.log,
                       {.step = 1, .shuffles = 1, .next = 2}, run.opts, fuzz::kFinetuneExamples);
  }
#ifdef SACCADE_FUZZ_HF
  write_hf_weights_seeds(corpus / "hf_weights");
#endif
  std::printf("seeds written under %s\n", corpus.c_str());
  return 0;
}
