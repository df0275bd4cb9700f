//! The backward passes handed to LibTorch's autograd (the calls too large to write out): each call's
//! gradient edges kept through `csrc/autograd.cpp`, and the burn backward step that runs
//! LibTorch's engine from them (see the parent module's documentation).

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

use std::ffi::c_void;

use burn::backend::LibTorch;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::libtorch::TchTensor;
use tch::Kind;

use super::cast_to;

/// The gradient edges of one LibTorch call run with gradient tracking (`csrc/autograd.cpp`):
/// its backward node, with what the call saved for it, and its inputs' edges.
#[derive(Debug)]
struct Edges(std::ptr::NonNull<c_void>);

// LibTorch's autograd nodes are reference counted and thread-safe; the edges are used once, by
// the backward pass of the burn node that owns them.
unsafe impl Send for Edges {}
unsafe impl Sync for Edges {}

mod bridge {
    use std::ffi::{c_char, c_int, c_void};
    unsafe extern "C" {
        pub fn trueneg_autograd_keep(
            output: *mut c_void,
            inputs: *mut *mut c_void,
            n: c_int,
            recorded: *mut *mut c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
        pub fn trueneg_autograd_backward(
            recorded: *mut c_void,
            grad: *mut c_void,
            grads: *mut *mut c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
        pub fn trueneg_autograd_free(recorded: *mut c_void);
    }
}

/// The tch handle's `at::Tensor*`, as the bridge takes it.
fn handle(t: &tch::Tensor) -> *mut c_void {
    t.as_ptr() as *mut c_void
}

/// Panics with the bridge's message: the backward pass has no error path, and a failure here
/// is a bug (a graph run twice, a gradient of another shape).
fn expect_bridge(what: &str, f: impl FnOnce(*mut std::ffi::c_char, usize) -> i32) {
    if let Err(e) = crate::error::bridge_call("failed", f) {
        panic!("LibTorch autograd: {what}: {e}");
    }
}

impl Edges {
    fn keep(output: &tch::Tensor, inputs: &[tch::Tensor]) -> Self {
        let mut handles: Vec<*mut c_void> = inputs.iter().map(handle).collect();
        let mut recorded = std::ptr::null_mut();
        expect_bridge("keeping the graph", |err, len| unsafe {
            bridge::trueneg_autograd_keep(
                handle(output),
                handles.as_mut_ptr(),
                handles.len() as i32,
                &mut recorded,
                err,
                len,
            )
        });
        Self(std::ptr::NonNull::new(recorded).expect("the bridge returned no graph"))
    }
}

impl Drop for Edges {
    fn drop(&mut self) {
        unsafe { bridge::trueneg_autograd_free(self.0.as_ptr()) }
    }
}

/// One LibTorch call's autograd graph: its edges, and handles on the tensors given to burn that
/// the backward pass reads (so that burn does not write into their memory in place).
#[derive(Clone, Debug)]
pub(in crate::kernels) struct Graph {
    edges: std::sync::Arc<Edges>,
    inputs: usize,
    /// The output's kind, which its gradient must have.
    kind: Kind,
    _pinned: Vec<TchTensor>,
}

impl Graph {
    /// Runs `f` on leaves sharing `inputs`' memory, with LibTorch's gradient tracking on. The
    /// result for burn (detached) and the graph, which keeps a handle on the result only when
    /// `output_saved` (the call's backward pass reads its output; where it does not, the
    /// output's memory is not held until the backward pass).
    pub(in crate::kernels) fn record(
        inputs: &[&TchTensor],
        output_saved: bool,
        f: impl FnOnce(&[tch::Tensor]) -> tch::Tensor,
    ) -> (TchTensor, Self) {
        let leaves: Vec<tch::Tensor> = inputs
            .iter()
            .map(|t| t.tensor.detach().requires_grad_(true))
            .collect();
        let output = tch::with_grad(|| f(&leaves));
        let result = TchTensor::new(output.detach());
        let mut pinned: Vec<TchTensor> = inputs.iter().map(|&t| t.clone()).collect();
        if output_saved {
            pinned.push(result.clone());
        }
        let graph = Graph {
            edges: std::sync::Arc::new(Edges::keep(&output, &leaves)),
            inputs: leaves.len(),
            kind: output.kind(),
            _pinned: pinned,
        };
        (result, graph)
    }

    /// The inputs' gradients given the output's gradient `grad` (the graph's saved tensors are
    /// freed); `None` for an input that gets none.
    fn gradients(self, grad: &TchTensor) -> Vec<Option<TchTensor>> {
        let cast = cast_to(&grad.tensor, self.kind);
        let grad = cast.as_ref().unwrap_or(&grad.tensor);
        let mut out = vec![std::ptr::null_mut::<c_void>(); self.inputs];
        expect_bridge("backward pass", |err, len| unsafe {
            bridge::trueneg_autograd_backward(
                self.edges.0.as_ptr(),
                handle(grad),
                out.as_mut_ptr(),
                err,
                len,
            )
        });
        out.into_iter()
            .map(|p| {
                (!p.is_null())
                    .then(|| TchTensor::new(unsafe { tch::Tensor::from_ptr(p as *mut _) }))
            })
            .collect()
    }
}

/// The backward step of a call with `N` differentiable inputs, through LibTorch's autograd over
/// the graph recorded in the forward pass.
#[derive(Debug)]
pub(in crate::kernels) struct GraphStep;

impl<const N: usize> Backward<LibTorch, N> for GraphStep {
    type State = Graph;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<LibTorch>(&ops.node);
        if ops.parents.iter().all(Option::is_none) {
            return;
        }
        let input_grads = ops.state.gradients(&grad);
        for (parent, g) in ops.parents.into_iter().zip(input_grads) {
            if let (Some(node), Some(g)) = (parent, g) {
                grads.register::<LibTorch>(node.id, g);
            }
        }
    }
}
