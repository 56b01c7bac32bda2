// The fused cells' element bodies (kernels/rnn_cell_kernels.h), which the cpu and the driver
// both run: each backward against central differences of its forward (float64), and the
// forwards against the gate math of PyTorch's cells written out.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "kernels/rnn_cell_kernels.h"

namespace ember::detail {
namespace {

using Vec = std::vector<double>;
constexpr int64_t kB = 2, kH = 3;

Vec random_values(int64_t n, std::mt19937& gen) {
  std::normal_distribution<double> normal(0.0, 1.5);  // reaches the flat ends of sigmoid and tanh
  Vec v(static_cast<size_t>(n));
  for (double& x : v) x = normal(gen);
  return v;
}

// d loss / d v[k] by central differences.
double numerical(const std::function<double(const Vec&)>& loss, Vec v, size_t k) {
  const double h = 1e-6, saved = v[k];
  v[k] = saved + h;
  const double plus = loss(v);
  v[k] = saved - h;
  return (plus - loss(v)) / (2 * h);
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(RnnCellMath, LstmForwardIsTorchsAndBackwardIsItsDerivative) {
  std::mt19937 gen(36);
  const Vec ig = random_values(kB * 4 * kH, gen), hg = random_values(kB * 4 * kH, gen),
            cx = random_values(kB * kH, gen);
  const Vec probe_h = random_values(kB * kH, gen), probe_c = random_values(kB * kH, gen);
  auto forward = [&](const Vec& igates, const Vec& c, Vec& hy, Vec& cy, Vec& workspace) {
    hy.assign(kB * kH, 0);
    cy.assign(kB * kH, 0);
    workspace.assign(kB * 4 * kH, 0);
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t j = 0; j < kH; ++j)
        lstm_cell_element<double>(b, j, kH, igates.data(), hg.data(), c.data(), hy.data(), cy.data(), workspace.data());
  };
  Vec hy, cy, workspace;
  forward(ig, cx, hy, cy, workspace);
  for (int64_t b = 0; b < kB; ++b) {
    for (int64_t j = 0; j < kH; ++j) {
      auto gate = [&](int64_t k) { return ig[b * 4 * kH + k * kH + j] + hg[b * 4 * kH + k * kH + j]; };
      const double c = sigmoid(gate(1)) * cx[b * kH + j] + sigmoid(gate(0)) * std::tanh(gate(2));
      EXPECT_NEAR(cy[b * kH + j], c, 1e-14);
      EXPECT_NEAR(hy[b * kH + j], sigmoid(gate(3)) * std::tanh(c), 1e-14);
    }
  }
  auto loss = [&](const Vec& igates, const Vec& c) {
    Vec h, cn, w;
    forward(igates, c, h, cn, w);
    double sum = 0;
    for (size_t k = 0; k < h.size(); ++k) sum += h[k] * probe_h[k] + cn[k] * probe_c[k];
    return sum;
  };
  Vec grad_gates(kB * 4 * kH), grad_cx(kB * kH);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t j = 0; j < kH; ++j)
      lstm_cell_backward_element<double>(b, j, kH, probe_h.data(), probe_c.data(), cx.data(), cy.data(),
                                         workspace.data(), grad_gates.data(), grad_cx.data());
  for (size_t k = 0; k < ig.size(); ++k)
    EXPECT_NEAR(grad_gates[k], numerical([&](const Vec& v) { return loss(v, cx); }, ig, k), 1e-7) << k;
  for (size_t k = 0; k < cx.size(); ++k)
    EXPECT_NEAR(grad_cx[k], numerical([&](const Vec& v) { return loss(ig, v); }, cx, k), 1e-7) << k;
}

TEST(RnnCellMath, GruForwardIsTorchsAndBackwardIsItsDerivative) {
  std::mt19937 gen(37);
  const Vec ig = random_values(kB * 3 * kH, gen), hg = random_values(kB * 3 * kH, gen),
            hx = random_values(kB * kH, gen);
  const Vec probe = random_values(kB * kH, gen);
  auto forward = [&](const Vec& i, const Vec& h, const Vec& x, Vec& hy, Vec& workspace) {
    hy.assign(kB * kH, 0);
    workspace.assign(kB * 5 * kH, 0);
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t j = 0; j < kH; ++j)
        gru_cell_element<double>(b, j, kH, i.data(), h.data(), x.data(), hy.data(), workspace.data());
  };
  Vec hy, workspace;
  forward(ig, hg, hx, hy, workspace);
  for (int64_t b = 0; b < kB; ++b) {
    for (int64_t j = 0; j < kH; ++j) {
      auto at = [&](const Vec& v, int64_t k) { return v[b * 3 * kH + k * kH + j]; };
      const double r = sigmoid(at(ig, 0) + at(hg, 0)), z = sigmoid(at(ig, 1) + at(hg, 1));
      const double n = std::tanh(at(ig, 2) + r * at(hg, 2));  // b_hn inside the reset product
      EXPECT_NEAR(hy[b * kH + j], (1 - z) * n + z * hx[b * kH + j], 1e-14);
    }
  }
  auto loss = [&](const Vec& i, const Vec& h, const Vec& x) {
    Vec y, w;
    forward(i, h, x, y, w);
    double sum = 0;
    for (size_t k = 0; k < y.size(); ++k) sum += y[k] * probe[k];
    return sum;
  };
  Vec grad_i(kB * 3 * kH), grad_h(kB * 3 * kH), grad_x(kB * kH);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t j = 0; j < kH; ++j)
      gru_cell_backward_element<double>(b, j, kH, probe.data(), workspace.data(), grad_i.data(), grad_h.data(),
                                        grad_x.data());
  for (size_t k = 0; k < ig.size(); ++k) {
    EXPECT_NEAR(grad_i[k], numerical([&](const Vec& v) { return loss(v, hg, hx); }, ig, k), 1e-7) << k;
    EXPECT_NEAR(grad_h[k], numerical([&](const Vec& v) { return loss(ig, v, hx); }, hg, k), 1e-7) << k;
  }
  for (size_t k = 0; k < hx.size(); ++k)
    EXPECT_NEAR(grad_x[k], numerical([&](const Vec& v) { return loss(ig, hg, v); }, hx, k), 1e-7) << k;
}

}  // namespace
}  // namespace ember::detail
