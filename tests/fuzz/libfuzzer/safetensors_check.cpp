// For differential.py: reads each safetensors file named on the command line with nn::load_safetensors and
// prints one line per file: "<path>\tOK\t<tensors>" or "<path>\tERR\t<message>".
#include <cstdio>

#include "nn/serialization.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    try {
      saccade::nn::Safetensors f = saccade::nn::load_safetensors(argv[i]);
      std::printf("%s\tOK\t%zu\n", argv[i], f.tensors.size());
    } catch (const saccade::Error& e) {
      std::string msg = e.what();
      for (char& c : msg)
        if (c == '\n' || c == '\t') c = ' ';
      std::printf("%s\tERR\t%s\n", argv[i], msg.c_str());
    }
  }
  return 0;
}
