// Rank-0-only output (rank_zero.h).
#include "distributed/rank_zero.h"

namespace saccade::distributed {

void save_checkpoint(const std::string& path, const nn::Module& module, const nn::Optimizer& optimizer,
                     int64_t step, const nn::Metadata& metadata, const nn::GradScaler* scaler) {
  if (is_main_process()) nn::save_checkpoint(path, module, optimizer, step, metadata, scaler);
  barrier();
}

}  // namespace saccade::distributed
