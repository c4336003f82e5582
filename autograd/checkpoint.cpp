// Activation checkpointing: forward without recording, backward by recomputing (see checkpoint.h).
#include "autograd/checkpoint.h"

#include <algorithm>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"

namespace saccade {

namespace {

// The generators a segment draws from and their states at its forward. restore() puts those states back
// for the recomputation; the destructor then returns each generator to where it was before.
struct GeneratorStates {
  std::vector<Generator*> gens;
  std::vector<Generator> at_forward;

  explicit GeneratorStates(const std::vector<Generator*>& extra) {
    gens.push_back(&default_generator());
    for (Generator* g : extra)
      if (g && std::find(gens.begin(), gens.end(), g) == gens.end()) gens.push_back(g);
    for (Generator* g : gens) at_forward.push_back(*g);
  }
};

class Replay {
 public:
  explicit Replay(const GeneratorStates& s) : s_(s) {
    for (size_t i = 0; i < s.gens.size(); ++i) {
      now_.push_back(*s.gens[i]);
      *s.gens[i] = s.at_forward[i];
    }
  }
  ~Replay() {
    for (size_t i = 0; i < s_.gens.size(); ++i) *s_.gens[i] = now_[i];
  }
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;

 private:
  const GeneratorStates& s_;
  std::vector<Generator> now_;
};

}  // namespace

Variable checkpoint(const std::function<Variable(const std::vector<Variable>&)>& fn,
                    const std::vector<Variable>& inputs, const std::vector<Generator*>& generators) {
  check_defined(op_info::checkpoint.name, inputs);
  bool any = false;
  for (const Variable& x : inputs) any = any || x.requires_grad();
  SACCADE_CHECK(!grad_enabled() || any,
                "checkpoint: no input requires grad, so no gradient could reach the parameters inside the "
                "segment; pass at least one input that requires grad ({} inputs)",
                inputs.size());
  std::vector<SavedVariable> saved;
  for (const Variable& x : inputs) saved.emplace_back(x, op_info::checkpoint);
  auto states = std::make_shared<GeneratorStates>(generators);
  // the recomputation runs inside backward, where autocast is off: it re-enters the forward's state
  const autocast::State autocast_state = autocast::state();
  Tensor out;
  {
    NoGradGuard no_grad;
    Variable y = fn(inputs);
    SACCADE_CHECK(y.defined(), "checkpoint: the function returned an undefined Variable");
    out = y.data();
  }
  for (size_t i = 0; i < saved.size(); ++i) saved[i].get();  // throws if fn changed an input in place

  // NOTE: the scope opens after the segment ran: its profiler range holds the recording, not the segment's
  // forward, whose ops have ranges of their own
  OpScope op(op_info::checkpoint, inputs);
  Variable result = make_result(
      op, out, inputs, [saved, states, fn, autocast_state](const Variable& g) -> std::vector<Variable> {
        check_once_differentiable(op_info::checkpoint.name);  // the recomputed segment is differentiated once
        std::vector<Variable> xs;
        for (const SavedVariable& s : saved) xs.push_back(s.get());
        // grad mode is off here, so the recomputation starts from leaves holding the inputs' data, and the
        // parameters fn uses get what the enclosing pass gives leaves: accumulated grads under backward(),
        // a share of the results under grad() (recompute_backward, function.h)
        return recompute_backward(
            xs,
            [&](const std::vector<Variable>& leaves) {
              autocast::StateGuard autocast(autocast_state);
              Replay replay(*states);
              Variable y = fn(leaves);
              SACCADE_CHECK(y.defined() && y.shape() == g.shape(),
                            "checkpoint: the recomputed result has shape {}, the forward's {}: the function "
                            "is not deterministic",
                            y.defined() ? y.shape() : Shape{}, g.shape());
              return y;
            },
            g);
      });
  if (result.grad_fn()) result.grad_fn()->set_runs_backward();
  return result;
}

}  // namespace saccade
