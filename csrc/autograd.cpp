// The backward pass of one LibTorch call that burn's autodiff hands over to LibTorch's own
// autograd (attention, LayerNorm: src/kernels/libtorch.rs). Between the two passes only the
// call's gradient edges are kept: the output's (LibTorch's backward node, with what the call
// saved for it) and each input's. The output tensor itself is not kept, so its memory goes
// when burn lets go of it unless the node saved it. The backward pass starts the engine at
// the output's edge with burn's gradient as it is: no scalar to build (a product with the
// gradient, a sum, a tensor of ones and their own backward kernels) and no gradient
// accumulated into the inputs.

#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>

#include "guarded.h"

#include <memory>
#include <stdexcept>
#include <vector>

namespace {

struct Recorded {
  torch::autograd::Edge output;
  std::vector<torch::autograd::Edge> inputs;
};

at::Tensor& tensor(void* handle) { return *static_cast<at::Tensor*>(handle); }

}  // namespace

extern "C" {

// Keeps the gradient edges of `output` and of the `n` tensors `inputs` (tch's handles:
// `at::Tensor*`, each requiring gradients) in `*recorded`, to be given to
// `trueneg_autograd_backward` and freed with `trueneg_autograd_free`.
int trueneg_autograd_keep(void* output, void** inputs, int n, void** recorded, char* err,
                          size_t err_len) {
  return trueneg_bridge::guarded(err, err_len, [&] {
    auto r = std::make_unique<Recorded>();
    if (!tensor(output).requires_grad()) {
      throw std::invalid_argument("autograd: the output is not attached to a graph");
    }
    r->output = torch::autograd::impl::gradient_edge(tensor(output));
    for (int i = 0; i < n; ++i) {
      if (!tensor(inputs[i]).requires_grad()) {
        throw std::invalid_argument("autograd: an input does not require gradients");
      }
      r->inputs.push_back(torch::autograd::impl::gradient_edge(tensor(inputs[i])));
    }
    *recorded = r.release();
  });
}

// Runs the backward pass from the output's edge with the output's gradient `grad` (its shape
// and dtype) and writes each input's gradient into `grads[i]` (a new `at::Tensor*`, or null
// where the input got none). The graph's saved tensors are freed; a second call fails.
int trueneg_autograd_backward(void* recorded, void* grad, void** grads, char* err,
                              size_t err_len) {
  return trueneg_bridge::guarded(err, err_len, [&] {
    auto* r = static_cast<Recorded*>(recorded);
    auto result = torch::autograd::Engine::get_default_engine().execute(
        {r->output}, {tensor(grad)}, /*keep_graph=*/false, /*create_graph=*/false,
        /*accumulate_grad=*/false, r->inputs);
    for (size_t i = 0; i < r->inputs.size(); ++i) {
      grads[i] = result[i].defined() ? new at::Tensor(result[i]) : nullptr;
    }
  });
}

void trueneg_autograd_free(void* recorded) { delete static_cast<Recorded*>(recorded); }

}  // extern "C"
