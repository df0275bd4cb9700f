//! The flat buffers registered for the parameters' casts, and the casts made of them (see the
//! parent module).

#![allow(deprecated)] // burn marks its LibTorch backend deprecated; it is our fastest on GPUs.

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
    // One view call: `x`'s shape and strides, at `x`'s offset in the buffer.
    let offset = ((at - e.start) / 4) as i64;
    let slice = whole.tensor.as_strided(x.size(), x.stride(), offset);
    // A view of the shared cast: burn never writes into it in place.
    Some(TchTensor::partial(slice, whole.storage.clone()))
}
