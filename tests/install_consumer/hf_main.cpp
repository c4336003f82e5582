// Uses an installed saccade::hf: reads a Llama config.json and builds the model it describes, and encodes
// with a tokenizer.json it writes into the folder argv[1]; prints what it got. Exit 0 when both are right.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <hf/config.h>
#include <hf/llama.h>
#include <hf/tokenizer.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  const saccade::hf::Config c = saccade::hf::parse_config(
      R"({"model_type": "llama", "vocab_size": 3, "hidden_size": 8, "num_hidden_layers": 1,
          "num_attention_heads": 2, "intermediate_size": 12, "max_position_embeddings": 16})");
  saccade::nn::LlamaForCausalLM model(saccade::hf::llama_config(c));
  std::ofstream(dir + "/tokenizer.json")
      << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})";
  const std::vector<int64_t> ids = saccade::hf::load_tokenizer(dir)->encode("abab", false);
  std::printf("%s; %zu parameters; ids", c.describe().c_str(), model.parameters().size());
  for (const int64_t id : ids) std::printf(" %lld", static_cast<long long>(id));
  std::printf("\n");
  return (c.hidden_size == 8 && ids == std::vector<int64_t>{2, 2}) ? 0 : 1;
}
