#include <ember/ember.h>

#include <iostream>

int main() {
  ember::cuda::emulate(2, size_t{256} << 20);
  auto x = ember::tensor({1., 2.}, "cuda:1");
  auto y = x * 2;
  std::cout << y << "\n";
  return y.str() == "tensor([2., 4.], device='cuda:1')" ? 0 : 1;
}
