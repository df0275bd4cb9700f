//! Parameters in the compute dtype from one cast of the flat buffer they live in.
//!
//! Under bf16 every product casts its f32 weight (and bias) to bf16 where it is used
//! (`model::precision`): one cast kernel per parameter and step, about 200 in the
//! ELECTRA-Small-sized step, each a launch on a GPU. The multi-tensor AdamW
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
    pub fn set(&self, flat: &burn::prelude::Tensor<1>) {
        #[cfg(feature = "tch")]
        if let Some(t) = super::tch_tensor(flat) {
            registry::set(self.id, t);
        }
        #[cfg(not(feature = "tch"))]
        let _ = flat;
    }

    /// Unregisters this owner's buffer (its parameters no longer live in one).
    pub fn clear(&self) {
        #[cfg(feature = "tch")]
        registry::remove(self.id);
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
    registry::stale();
}

#[cfg(feature = "tch")]
pub(super) mod registry {
    #![allow(deprecated)] // burn marks its LibTorch backend deprecated.

    use std::sync::Mutex;

    use burn::backend::libtorch::TchTensor;
    use tch::Kind;

    struct Entry {
        owner: u64,
        flat: tch::Tensor,
        /// The buffer's address range in bytes.
        start: usize,
        end: usize,
        casts: Vec<(Kind, TchTensor)>,
    }

    static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

    fn entries() -> std::sync::MutexGuard<'static, Vec<Entry>> {
        ENTRIES.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn set(owner: u64, flat: tch::Tensor) {
        let mut all = entries();
        all.retain(|e| e.owner != owner);
        if flat.kind() != Kind::Float || flat.dim() != 1 || !flat.is_contiguous() {
            return;
        }
        let start = flat.data_ptr() as usize;
        let end = start + flat.numel() * 4;
        all.push(Entry {
            owner,
            flat,
            start,
            end,
            casts: Vec::new(),
        });
    }

    pub(crate) fn remove(owner: u64) {
        entries().retain(|e| e.owner != owner);
    }

    pub(crate) fn stale() {
        for e in entries().iter_mut() {
            e.casts.clear();
        }
    }

    /// `x` in `kind` as a slice of its registered buffer's cast (made now if this is the
    /// buffer's first cast to `kind`); `None` when `x` is not a contiguous f32 slice of a
    /// registered buffer.
    pub(crate) fn cast_of(x: &tch::Tensor, kind: Kind) -> Option<TchTensor> {
        if x.kind() != Kind::Float || !x.is_contiguous() {
            return None;
        }
        let (at, len) = (x.data_ptr() as usize, x.numel());
        let mut all = entries();
        let e = all
            .iter_mut()
            .find(|e| e.start <= at && at + len * 4 <= e.end && e.flat.device() == x.device())?;
        let whole = match e.casts.iter().find(|(k, _)| *k == kind) {
            Some((_, c)) => c,
            None => {
                let c = TchTensor::new(tch::no_grad(|| e.flat.to_kind(kind)));
                e.casts.push((kind, c));
                &e.casts.last().expect("just pushed").1
            }
        };
        // One view call: `x`'s shape with contiguous strides, at `x`'s offset in the buffer.
        let size = x.size();
        let mut stride = vec![1i64; size.len()];
        for d in (1..size.len()).rev() {
            stride[d - 1] = stride[d] * size[d];
        }
        let offset = ((at - e.start) / 4) as i64;
        let slice = whole.tensor.as_strided(&size, &stride, offset);
        // A view of the shared cast: burn never writes into it in place.
        Some(TchTensor::partial(slice, whole.storage.clone()))
    }
}
