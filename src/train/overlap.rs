//! The gradients of a data-parallel step summed over the processes while the backward pass
//! still runs, bucket by bucket, as PyTorch's DDP does (on `libtorch-cuda`, and on LibTorch's
//! CPU device with `TRUENEG_OVERLAP=1`; `TRUENEG_OVERLAP=0` turns it off: see
//! [`Overlap::wanted`]).
//!
//! The encoder layers' parameters are watched ([`crate::kernels::grad_watch`]): the backward
//! pass hands each one's gradient to [`Overlap`] as soon as its layer is done. The first step
//! lays them out in one flat buffer, in buckets of at most [`crate::dist::BUCKET`] floats that
//! never span two layers, ordered as the backward pass finishes them (the last layer first).
//! Each step the buffer starts at zero and every watched gradient is added to its place; when
//! every parameter of a bucket has all its contributions, the bucket's all-reduce starts, on
//! the device (NCCL on GPUs, Gloo on the CPU), while the backward pass goes on. Buckets start
//! strictly in their order, so every rank starts the same all-reduces in the same order,
//! whatever the order of the hooks. After the backward pass the remaining buckets start, then
//! all are waited on (a parameter the backward pass did not reach is left out of the step's
//! gradients, as burn's own gradients would leave it). The embeddings and heads, which are not watched, are summed after the backward pass as
//! before ([`Grads::all_reduce`](super::grads::Grads::all_reduce)).
//!
//! Sums are those of the unbucketed all-reduce: `0 + g` is `g`, and each float is summed over
//! the same ranks in the same order (`tests/suite/distributed.rs` compares whole runs bit for bit).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use burn::module::ParamId;
use burn::prelude::*;

use crate::Result;
use crate::dist::{BUCKET, Group, Work};
use crate::kernels::grad_watch::GradSink;

/// One watched parameter: where it lies in the flat buffer, and its contributions this step.
struct Slot {
    id: ParamId,
    numel: usize,
    layer: usize,
    /// The index of the layer's group (one encoder layer's first use, in forward order).
    group: usize,
    offset: usize,
    bucket: usize,
    uses: u32,
    fired: u32,
}

/// A contiguous range of the flat buffer, all-reduced as one.
struct Bucket {
    offset: usize,
    len: usize,
    /// Watched parameters of the bucket whose contributions are not all in yet.
    waiting: usize,
}

#[derive(Default)]
struct State {
    slots: Vec<Slot>,
    by_id: HashMap<ParamId, usize>,
    buckets: Vec<Bucket>,
    total: usize,
    /// The step's flat buffer (burn's handle, and LibTorch's on the same memory).
    flat: Option<(Tensor<1>, tch::Tensor)>,
    /// The next bucket to start.
    next: usize,
    /// The started all-reduces, with the views they sum (kept alive until waited on).
    started: Vec<(Work, tch::Tensor)>,
    error: Option<crate::Error>,
    /// The first step's overlap has been reported.
    told: bool,
}

/// Gradients of watched parameters, summed over the ranks of `group` during the backward pass.
pub struct Overlap {
    group: Arc<Group>,
    state: Mutex<State>,
}

impl Overlap {
    pub fn new(group: Arc<Group>) -> Self {
        Self {
            group,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether data-parallel steps on `device` overlap their all-reduce with the backward
    /// pass: on `libtorch-cuda` unless `TRUENEG_OVERLAP=0`; on LibTorch's CPU device only with
    /// `TRUENEG_OVERLAP=1` (there Gloo's copies compete for the cores the backward pass is using;
    /// BENCHMARKS.md).
    pub fn wanted(device: &Device) -> bool {
        if !crate::kernels::torch(device) {
            return false;
        }
        match std::env::var("TRUENEG_OVERLAP").as_deref() {
            Ok("0") => false,
            Ok("1") => true,
            _ => crate::kernels::cuda_index(device).is_some(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Before a forward pass: no use counted yet.
    pub fn begin_forward(&self) {
        let mut s = self.state();
        for slot in &mut s.slots {
            slot.uses = 0;
        }
    }

    /// Before the backward pass: lays the parameters out (first step), makes the zeroed flat
    /// buffer on `device`, and starts the buckets nothing in this step contributes to.
    pub fn begin_backward(&self, device: &Device) {
        let mut s = self.state();
        if s.buckets.is_empty() && !s.slots.is_empty() {
            lay_out(&mut s);
        }
        let flat = Tensor::<1>::zeros([s.total.max(1)], device);
        let handle = crate::kernels::tch_tensor(&flat).expect("a LibTorch device");
        s.flat = Some((flat, handle));
        for slot in &mut s.slots {
            slot.fired = 0;
        }
        for b in &mut s.buckets {
            b.waiting = 0;
        }
        let waiting: Vec<usize> = s
            .slots
            .iter()
            .filter(|slot| slot.uses > 0)
            .map(|slot| slot.bucket)
            .collect();
        for b in waiting {
            s.buckets[b].waiting += 1;
        }
        s.next = 0;
        s.started.clear();
        s.error = None;
        self.start_ready(&mut s);
    }

    /// Starts every bucket from the next one on whose gradients are all in.
    fn start_ready(&self, s: &mut State) {
        while s.error.is_none() && s.next < s.buckets.len() && s.buckets[s.next].waiting == 0 {
            self.start(s);
        }
    }

    fn start(&self, s: &mut State) {
        let b = &s.buckets[s.next];
        let (_, flat) = s.flat.as_ref().expect("begin_backward made the buffer");
        let view = flat.narrow(0, b.offset as i64, b.len as i64);
        s.next += 1;
        match self.group.start_sum(&view) {
            Ok(w) => s.started.push((w, view)),
            Err(e) => s.error = Some(e),
        }
    }

    /// After the backward pass: starts the buckets not started yet, waits for all, and returns
    /// each watched parameter's summed gradient (flat, a view of the buffer).
    pub fn finish(&self) -> Result<HashMap<ParamId, Tensor<1>>> {
        let mut s = self.state();
        if !s.told && self.group.world.is_main() {
            s.told = true;
            tracing::info!(
                "all-reduce overlapped with the backward pass: {} of {} buckets of the encoder layers ({} floats) started before it ended",
                s.next,
                s.buckets.len(),
                s.total,
            );
        }
        while s.error.is_none() && s.next < s.buckets.len() {
            self.start(&mut s);
        }
        let started = std::mem::take(&mut s.started);
        let waited = started.iter().try_for_each(|(w, _)| self.group.wait(w));
        if let Some(e) = s.error.take() {
            return Err(e);
        }
        waited?;
        let (flat, _) = s.flat.take().expect("begin_backward made the buffer");
        // Only what this step's backward pass reached, as burn's own gradients would have it.
        Ok(s.slots
            .iter()
            .filter(|slot| slot.fired > 0)
            .map(|slot| {
                let range = slot.offset..slot.offset + slot.numel;
                (slot.id, flat.clone().slice(range))
            })
            .collect())
    }
}

impl GradSink for Overlap {
    fn slot(&self, id: ParamId, numel: usize, layer: usize) -> usize {
        let mut s = self.state();
        if let Some(&i) = s.by_id.get(&id) {
            s.slots[i].uses += 1;
            return i;
        }
        if !s.buckets.is_empty() {
            // Laid out already: a parameter the first step did not use goes the ordinary way.
            return usize::MAX;
        }
        let group = match s.slots.last() {
            Some(last) if last.layer == layer => last.group,
            Some(last) => last.group + 1,
            None => 0,
        };
        let i = s.slots.len();
        s.slots.push(Slot {
            id,
            numel,
            layer,
            group,
            offset: 0,
            bucket: 0,
            uses: 1,
            fired: 0,
        });
        s.by_id.insert(id, i);
        i
    }

    fn ready(&self, slot: usize, grad: &tch::Tensor) {
        let mut s = self.state();
        let Some(info) = s.slots.get(slot) else {
            return;
        };
        let (offset, numel, bucket) = (info.offset, info.numel, info.bucket);
        if s.next > bucket {
            // Its bucket is summed already (a contribution after the uses counted): keep the
            // run from diverging across ranks silently.
            s.error.get_or_insert_with(|| {
                crate::Error::Distributed("a watched gradient came after its bucket".into())
            });
            return;
        }
        let (_, flat) = s.flat.as_ref().expect("begin_backward made the buffer");
        let mut place = flat.narrow(0, offset as i64, numel as i64);
        tch::no_grad(|| {
            let _ = place.g_add_(&grad.reshape([-1]).to_kind(place.kind()));
        });
        let info = &mut s.slots[slot];
        info.fired += 1;
        if info.fired == info.uses {
            s.buckets[bucket].waiting -= 1;
            self.start_ready(&mut s);
        }
    }
}

/// Buckets in the backward pass's order: layer groups from the last layer down (the encoder
/// run later first among equal layers), each cut at parameter boundaries every
/// [`BUCKET`] floats.
fn lay_out(s: &mut State) {
    let mut groups: Vec<(usize, usize)> = s.slots.iter().map(|x| (x.layer, x.group)).collect();
    groups.dedup();
    groups.sort_by(|a, b| b.cmp(a));
    let mut offset = 0;
    for (_, group) in groups {
        let members: Vec<usize> = (0..s.slots.len())
            .filter(|&i| s.slots[i].group == group)
            .collect();
        let mut open = false;
        for i in members {
            let numel = s.slots[i].numel;
            let fits = open && s.buckets.last().is_some_and(|b| b.len + numel <= BUCKET);
            if !fits {
                s.buckets.push(Bucket {
                    offset,
                    len: 0,
                    waiting: 0,
                });
                open = true;
            }
            let b = s.buckets.len() - 1;
            s.buckets[b].len += numel;
            s.slots[i].offset = offset;
            s.slots[i].bucket = b;
            offset += numel;
        }
    }
    s.total = offset;
}
