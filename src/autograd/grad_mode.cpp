// Grad mode: a thread-local switch, as PyTorch's GradMode.
#include "ember/autograd.h"

namespace ember {

namespace {
thread_local bool grad_enabled = true;
}  // namespace

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

}  // namespace ember
