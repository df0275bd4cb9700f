//! Parameter gradients reported as soon as the backward pass has finished them, so that a
//! data-parallel job can start summing them over its processes while the rest of the backward
//! pass runs (as PyTorch's DDP does with its autograd hooks).
//!
//! burn's autodiff has no hook on a parameter's gradient, and it runs its backward steps by
//! depth (a node's depth is one more than its deepest input's), not in reverse order of
//! creation: a step on a parameter alone (a cast to bf16, the concatenated Q/K/V weight) has a
//! depth of 1 and runs at the very end. So the hook is an operation of its own, placed in front
//! of a whole layer: while a [`GradSink`] is installed ([`watching`]), [`layer`] maps each
//! parameter `w` of an encoder layer to `watched(w, x)`, the identity on `w` that also takes the
//! layer's input `x` as an input (no gradient flows to it). Its depth is then one more than
//! `x`'s: every step of the layer, including those on its parameters alone, is deeper and runs
//! before it, and every step of the layers below runs after it. Its backward step hands the
//! gradient of `w` (the sum over all the layer's uses) to the sink and passes it on unchanged.
//!
//! A parameter used by several forward passes of one step (a step that encodes three sentences) is watched
//! once per use: the sink adds the contributions and counts them. Embeddings and heads are not
//! watched (they are used in several places, and their gradients are the last to be finished
//! anyway). Only burn's LibTorch backend (feature `tch`) has the operation; elsewhere [`layer`]
//! returns `None` and nothing changes.

use std::cell::RefCell;
use std::sync::Arc;

use burn::module::{Module, ParamId};
use burn::prelude::*;

/// Where the watched parameters' gradients go.
pub trait GradSink: Send + Sync {
    /// The slot of parameter `id` (`numel` values) of encoder layer `layer`, for one use of it
    /// in the forward pass (called once per use, in the forward pass's order).
    fn slot(&self, id: ParamId, numel: usize, layer: usize) -> usize;
    /// One use's contribution to `slot`'s gradient (f32, the parameter's shape), from the
    /// backward pass.
    #[cfg(feature = "tch")]
    fn ready(&self, slot: usize, grad: &tch::Tensor);
}

thread_local! {
    static SINK: RefCell<Option<Arc<dyn GradSink>>> = const { RefCell::new(None) };
}

/// Runs `f` (a forward pass) with `sink` watching the encoder layers' parameters.
pub fn watching<R>(sink: Arc<dyn GradSink>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Arc<dyn GradSink>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SINK.with(|s| *s.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(SINK.with(|s| s.borrow_mut().replace(sink)));
    f()
}

/// `layer` (encoder layer `index`) with every parameter watched, anchored on the layer's input
/// `x`; `None` when nothing watches or the backend has no watch (then run `layer` itself).
pub fn layer<M: Module>(layer: &M, x: &Tensor<3>, index: usize) -> Option<M> {
    let sink = SINK.with(|s| s.borrow().clone())?;
    #[cfg(feature = "tch")]
    if super::select::torch(&x.device()) {
        let mut mapper = Watch {
            sink,
            anchor: x.clone(),
            index,
        };
        return Some(layer.clone().map(&mut mapper));
    }
    let _ = (sink, layer, x, index);
    None
}

#[cfg(feature = "tch")]
pub use torch::{Sink, WatchOps};

#[cfg(feature = "tch")]
struct Watch {
    sink: Arc<dyn GradSink>,
    anchor: Tensor<3>,
    index: usize,
}

#[cfg(feature = "tch")]
impl burn::module::ModuleMapper for Watch {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<Tensor<D>>,
    ) -> burn::module::Param<Tensor<D>> {
        let id = param.id;
        let slot = |w: &Tensor<D>| self.sink.slot(id, w.shape().num_elements(), self.index);
        let anchor = self.anchor.clone();
        let sink = self.sink.clone();
        param.map(|w| {
            let slot = slot(&w);
            Tensor::from_dispatch(<burn::backend::Dispatch as WatchOps>::watched(
                w.into_dispatch(),
                anchor.into_dispatch(),
                slot,
                Sink(sink),
            ))
        })
    }
}

#[cfg(feature = "tch")]
mod torch {
    #![allow(deprecated)] // burn marks its LibTorch backend deprecated.

    use std::sync::Arc;

    use burn::backend::autodiff::checkpoint::base::Checkpointer;
    use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
    use burn::backend::autodiff::grads::Gradients;
    use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
    use burn::backend::libtorch::TchTensor;
    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Autodiff, Backend, LibTorch, backend_extension};

    use super::GradSink;

    /// The sink a watched parameter reports to (a handle burn's autodiff can keep).
    #[derive(Clone)]
    pub struct Sink(pub Arc<dyn GradSink>);

    impl std::fmt::Debug for Sink {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Sink")
        }
    }

    #[backend_extension(LibTorch, Autodiff)]
    pub trait WatchOps: Backend {
        /// `w`, unchanged; under autodiff its gradient goes to `sink`'s `slot` on its way
        /// back, after every step that depends on `anchor` (see the module's text).
        fn watched(
            w: FloatTensor<Self>,
            anchor: FloatTensor<Self>,
            slot: usize,
            sink: Sink,
        ) -> FloatTensor<Self>;
    }

    impl WatchOps for LibTorch {
        fn watched(w: TchTensor, _: TchTensor, _: usize, _: Sink) -> TchTensor {
            w
        }
    }

    #[derive(Debug)]
    struct WatchStep;

    impl Backward<LibTorch, 2> for WatchStep {
        type State = (usize, Sink);

        fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<LibTorch>(&ops.node);
            let [w, _anchor] = ops.parents;
            if let Some(node) = w {
                let (slot, sink) = &ops.state;
                sink.0.ready(*slot, &grad.tensor);
                grads.register::<LibTorch>(node.id, grad);
            }
        }
    }

    impl<C: CheckpointStrategy> WatchOps for Autodiff<LibTorch, C> {
        fn watched(
            w: FloatTensor<Self>,
            anchor: FloatTensor<Self>,
            slot: usize,
            sink: Sink,
        ) -> FloatTensor<Self> {
            let guards = [w.node(), anchor.node()];
            let w = w.into_primitive();
            match WatchStep.prepare::<C>(guards).compute_bound().stateful() {
                OpsKind::Tracked(prep) => prep.finish((slot, sink), w),
                OpsKind::UnTracked(prep) => prep.finish(w),
            }
        }
    }
}
