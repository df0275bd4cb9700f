//! Parameters in the compute dtype from one cast of the flat buffer they live in.
//!
//! Under bf16 every product casts its f32 weight (and bias) to bf16 where it is used
//! (`model::precision`): one cast kernel per parameter and step, about 200 in the
//! ELECTRA-Small-sized step, each a launch on a GPU. The multi-tensor optimizer
//! (`train::optimizer`) leaves every parameter a slice of one flat f32 buffer; it registers
//! that buffer here ([`FlatParams::set`]). The first cast of a parameter that lies in a
//! registered buffer then casts the whole buffer once, and every parameter's cast in that
//! step is its slice of the result, with no kernel. Values and gradients are those of the
//! per-parameter cast: the slice holds the same rounded values, and the backward pass casts
//! the gradient back to f32 as the cast's own backward pass does (`kernels::param_cast`).
//!
//! A cast buffer is valid until the parameters change: a new buffer registered by the next
//! update, or a recorded step replayed (the replay rewrote the buffer on the device;
//! [`stale`]). It is then cast again at the next use, so a recorded step records that cast
//! and each replay repeats it. LibTorch devices only (feature `tch`); elsewhere a parameter
//! is cast on its own.

use burn::prelude::*;
use burn::tensor::{DType, FloatDType};

#[cfg(feature = "tch")]
mod flat_casts;
#[cfg(feature = "tch")]
pub mod torch;

/// Parameter `w` in `dtype` (f32 or bf16), its gradient cast back: on LibTorch devices its
/// slice of one cast of the registered flat buffer it lies in, elsewhere (or for a tensor
/// outside such a buffer) its own cast. `kernels::param_cast`.
pub fn cast<const D: usize>(w: Tensor<D>, dtype: FloatDType) -> Tensor<D> {
    let bf16 = match dtype {
        FloatDType::F32 => false,
        FloatDType::BF16 => true,
        _ => return w.cast(dtype),
    };
    if w.dtype() == DType::from(dtype) || !super::select::torch(&w.device()) {
        return w.cast(dtype);
    }
    Tensor::from_dispatch(extension_op!(
        "tch",
        torch::TorchParamCast,
        torch_param_cast(w.into_dispatch(), bf16)
    ))
}

/// The owner of one registered flat buffer (an optimizer); dropping it unregisters it.
#[derive(Debug)]
pub struct FlatParams {
    #[cfg_attr(not(feature = "tch"), allow(dead_code))]
    id: u64,
}

impl Default for FlatParams {
    fn default() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl FlatParams {
    /// Registers `flat` (1-D, contiguous) as the buffer this owner's parameters are slices
    /// of, replacing the owner's last one; its casts are made on first use.
    pub fn set(&self, flat: &Tensor<1>) {
        #[cfg(feature = "tch")]
        if let Some(t) = super::libtorch::tch_tensor(flat) {
            flat_casts::set(self.id, t);
        }
        #[cfg(not(feature = "tch"))]
        let _ = flat;
    }

    /// Unregisters this owner's buffer (its parameters no longer live in one).
    pub fn clear(&self) {
        #[cfg(feature = "tch")]
        flat_casts::remove(self.id);
    }
}

impl Drop for FlatParams {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Drops every cast made so far: the registered buffers were rewritten in place (a recorded
/// step replayed), so the next use casts them again.
pub fn stale() {
    #[cfg(feature = "tch")]
    flat_casts::stale();
}
