#pragma once
// The CPU thread budget: one number for every thread saccade runs on the CPU.
//
// saccade's kernels run on its own small pool (ops/cpu/thread_pool.h); OpenBLAS is kept at one thread and
// large GEMMs are split across that same pool, so there is one pool and never two spinning against each
// other. Idle pool threads sleep (they spin only briefly before blocking: kSpin in ops/cpu/thread_pool.cpp),
// so a thread that finds no free core costs its siblings little: on a machine shared with other processes, n
// threads are never much slower than one.

namespace saccade {

/// Sets the number of CPU threads saccade's kernels (and the GEMMs they call) use, the calling thread
/// included; 1 runs everything on the calling thread. Takes effect for the next kernel; call it between
/// ops, not from inside one. The default is `OMP_NUM_THREADS` when set, else the number of hardware threads.
/// Also sets OpenBLAS to one thread (its GEMMs are split by saccade's pool), so `openblas_set_num_threads`
/// need not be called. Throws saccade::Error when n < 1.
void set_num_threads(int n);

/// The number of CPU threads kernels use (see set_num_threads); at least 1.
int get_num_threads();

}  // namespace saccade
