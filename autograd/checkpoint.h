#pragma once
// Activation checkpointing (torch.utils.checkpoint, reentrant variant; Chen et al. 2016, "Training Deep Nets
// with Sublinear Memory Cost"): a segment's forward runs without recording, keeping only its inputs; its
// backward runs the forward again, recording, and the engine over that segment. Memory: the activations
// inside the segment live only during its backward. Cost: one more forward of the segment.
#include <functional>
#include <vector>

#include "autograd/variable.h"
#include "ops/random.h"

namespace saccade {

/// y = fn(inputs), recorded as one node whose backward recomputes fn.
///
/// - Forward: fn runs under NoGradGuard; the inputs are saved (with their versions), and so are autocast's
///   state (on or off, and its dtype) and the state (seed, offset) of the default generator and of each of
///   `generators`: the recomputation runs under the same autocast state and draws the same random numbers
///   (dropout repeats exactly), and afterwards the generators continue where they were.
/// - Backward: fn runs again with recording on, from leaves holding the inputs' data, and the engine runs
///   over that graph with the incoming gradient: recompute_backward (autograd/function.h), the one recompute
///   path, which a fused kernel's second derivative takes too. Under backward(), the parameters fn uses get
///   their grads accumulated as without checkpointing (their hooks, DDP's included, fire); under
///   saccade::grad, no grad is written and grad() returns what it returns without checkpointing, for the
///   parameters inside the segment too. The inputs' gradients flow on.
///
/// `fn` must be deterministic given its inputs and the generators' states. Throws saccade::Error naming
/// "checkpoint" when an input is undefined, when grad mode is on and no input requires grad (no gradient
/// could reach fn's parameters), when fn changes an input in place (in the forward, or between forward and
/// backward), when fn returns an undefined Variable, and under create_graph (a checkpointed segment is
/// differentiated once; second derivatives go through saccade::grad without checkpointing).
Variable checkpoint(const std::function<Variable(const std::vector<Variable>&)>& fn,
                    const std::vector<Variable>& inputs, const std::vector<Generator*>& generators = {});

}  // namespace saccade
