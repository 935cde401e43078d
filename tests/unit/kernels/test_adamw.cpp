// Tests of AdamW against a scalar double implementation of torch.optim.AdamW over three
// steps, the decoupling of weight decay from the moments, and step-1 bias correction.
#include "runtime/kernels/cpu/adamw.h"

#include "kernel_test_util.h"

namespace {

using namespace runtime::cpu;
using namespace kernel_test;

struct ScalarAdamW {
  double p, m = 0, v = 0;
  void step(double g, const AdamWParams& h, int64_t t) {
    p *= 1 - double{h.lr} * h.weight_decay;
    m = h.beta1 * m + (1 - double{h.beta1}) * g;
    v = h.beta2 * v + (1 - double{h.beta2}) * g * g;
    const double bc1 = 1 - std::pow(double{h.beta1}, double(t)),
                 bc2 = 1 - std::pow(double{h.beta2}, double(t));
    p -= h.lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + h.eps);
  }
};

TEST(AdamW, ThreeStepsMatchScalarDoubleReference) {
  const int64_t n = 300;
  AdamWParams hyper;
  hyper.lr = 1e-2f;
  hyper.beta1 = 0.9f;
  hyper.beta2 = 0.95f;
  hyper.eps = 1e-8f;
  hyper.weight_decay = 0.1f;
  auto param = random_vector(n, 1);
  std::vector<float> m(n, 0.f), v(n, 0.f);
  std::vector<ScalarAdamW> ref;
  for (float p : param) ref.push_back(ScalarAdamW{p});
  for (int64_t step = 1; step <= 3; ++step) {
    const auto grad = random_vector(n, 10 + uint32_t(step), -2.f, 2.f);
    hyper.step = step;
    adamw_step(param.data(), m.data(), v.data(), grad.data(), n, hyper);
    for (int64_t i = 0; i < n; ++i) ref[i].step(grad[i], hyper, step);
  }
  std::vector<double> want_p, want_m, want_v;
  for (const auto& r : ref) want_p.push_back(r.p), want_m.push_back(r.m), want_v.push_back(r.v);
  expect_close(param, want_p, 1e-6, 1e-5, "param");
  expect_close(m, want_m, 1e-7, 1e-5, "exp_avg");
  expect_close(v, want_v, 1e-8, 1e-5, "exp_avg_sq");
}

TEST(AdamW, WeightDecayIsDecoupledFromTheMoments) {
  const int64_t n = 64;
  AdamWParams hyper;
  hyper.lr = 0.05f;
  hyper.step = 4;
  const auto param0 = random_vector(n, 2, 1.f, 3.f), grad = random_vector(n, 3);
  const auto m0 = random_vector(n, 4), v0 = random_vector(n, 5, 0.1f, 1.f);
  auto run = [&](float wd, std::vector<float>& m, std::vector<float>& v) {
    auto p = param0;
    m = m0, v = v0;
    AdamWParams h = hyper;
    h.weight_decay = wd;
    adamw_step(p.data(), m.data(), v.data(), grad.data(), n, h);
    return p;
  };
  std::vector<float> m_decay, v_decay, m_plain, v_plain;
  const auto with_decay = run(0.2f, m_decay, v_decay);
  const auto without = run(0.f, m_plain, v_plain);
  // Moments never see the decay (an L2 penalty would add wd * p to the gradient) ...
  EXPECT_TRUE(bitwise_equal(m_decay, m_plain));
  EXPECT_TRUE(bitwise_equal(v_decay, v_plain));
  // ... and the parameter moves by exactly -lr * wd * p more.
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(with_decay[i] - without[i], -0.05 * 0.2 * param0[i], 2e-6) << i;

  // No gradient and no history: only the decay acts.
  std::vector<float> p = param0, m(n, 0.f), v(n, 0.f), zero(n, 0.f);
  AdamWParams h = hyper;
  h.weight_decay = 0.2f;
  adamw_step(p.data(), m.data(), v.data(), zero.data(), n, h);
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(p[i], param0[i] * (1.f - 0.05f * 0.2f));
}

TEST(AdamW, BitIdenticalAcrossThreadCounts) {
  const int64_t n = 50000;
  const auto grad = random_vector(n, 6);
  AdamWParams hyper;
  hyper.lr = 1e-3f;
  hyper.weight_decay = 0.1f;
  hyper.step = 7;
  auto run = [&] {
    auto p = random_vector(n, 7), m = random_vector(n, 8), v = random_vector(n, 9, 0.f, 1.f);
    adamw_step(p.data(), m.data(), v.data(), grad.data(), n, hyper);
    return concat(p, m, v);
  };
  expect_thread_count_independent(run);
}

TEST(AdamW, FirstStepIsBiasCorrectedToSignOfGradient) {
  AdamWParams hyper;
  hyper.lr = 1e-3f;
  hyper.step = 1;
  std::vector<float> p = {1.f, 1.f, 1.f}, m(3, 0.f), v(3, 0.f);
  const std::vector<float> g = {0.5f, -2e-3f, 30.f};
  adamw_step(p.data(), m.data(), v.data(), g.data(), 3, hyper);
  // m_hat = g, v_hat = g^2: the update is lr * g / (|g| + eps) ~ lr * sign(g).
  EXPECT_NEAR(p[0], 1.f - 1e-3f, 1e-6);
  EXPECT_NEAR(p[1], 1.f + 1e-3f, 1e-6);
  EXPECT_NEAR(p[2], 1.f - 1e-3f, 1e-6);
}

}  // namespace
