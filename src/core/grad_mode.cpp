// Grad mode: a thread-local switch, as PyTorch's GradMode. It lives in core so that the op layer
// reads it without knowing autograd (Note [Recording ops] in src/ops/recording.h).
#include "ember/autograd.h"

namespace ember {

namespace {
thread_local bool grad_enabled = true;
}  // namespace

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

}  // namespace ember
