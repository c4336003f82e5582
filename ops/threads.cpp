// The CPU thread budget (ops/threads.h): one number, held by the CPU backend's pool (ops/cpu/thread_pool.h).
#include "ops/threads.h"

#include "ops/cpu/thread_pool.h"

namespace saccade {

void set_num_threads(int n) { cpu::set_pool_size(n); }

int get_num_threads() { return cpu::pool_size(); }

}  // namespace saccade
