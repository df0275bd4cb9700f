//! Data-parallel pre-training: one replica of the model per device of `train.devices` (host
//! replicas), or one per process of a data-parallel job, all updated with the same summed
//! gradients.
//!
//! Each micro-step, the micro-batch of `data.batch_size` rows is masked on the host as it would
//! be for one device, then split into k equal row shards. Replica r runs the forward pass of
//! shard r with the random draws of seed (step, r) (dropout, generator sampling; replica 0 draws
//! with the seed a one-device run uses). Its loss is its share of the micro-batch's objective
//! ([`StepLoss::objective`]: each term weighted by the replica's share of that term's count:
//! masked positions, kept positions, real tokens, sentences), so the sum of the replicas'
//! gradients is the gradient of the whole micro-batch, however the counts fall: k replicas ×
//! b rows train like one device × k·b rows (equal to f32 rounding where no random draw differs,
//! i.e. dropout off and no generator sampling; `tests/suite/parallel.rs`).
//!
//! The backward passes run one after another and their gradients are added with burn tensor
//! operations on replica 0's device; replica 0 takes the AdamW step and the others copy its
//! parameters. Several replicas in one process exist to test the arithmetic of data
//! parallelism without LibTorch (the default build has no collectives); they are not faster
//! than one. Several GPUs or nodes train as one process each, joined by c10d
//! ([`crate::dist`], [`Replicas::join`]): there each process is one replica, and its share of
//! the rows, seeds and loss is the same as here.
//!
//! A `--devices` list of GPUs is refused with the advice to launch one process per GPU: burn's
//! own CUDA backend, the only one that could hold several GPUs in one process, is far slower
//! per step than LibTorch's (BENCHMARKS.md).
//!
//! The forward passes run one after another from one thread: burn's random seed is one per
//! process on every backend (flex, cubecl), so replicas drawing at the same time could not be
//! reproduced. GPU work is queued asynchronously, so the devices still overlap except at the
//! forward pass's host reads.

use std::ops::Range;
use std::sync::Arc;

use burn::prelude::*;

use super::model::PretrainModel;
use super::optimizer::{AdamW, Grads};
use crate::Result;
use crate::dist::Group;
use crate::model::params::ShapeLister;
use crate::objective::StepLoss;
use crate::objective::terms::{self, Counters, Pending, StepValues, WindowCounts};

/// The seed of replica `r`'s random draws in the micro-step seeded `step_seed`.
pub fn replica_seed(step_seed: u64, r: usize) -> u64 {
    if r == 0 {
        step_seed
    } else {
        step_seed ^ (r as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

pub struct Replicas {
    /// One model per device; replica 0 is the one checkpoints are written from.
    pub models: Vec<PretrainModel>,
    /// Replica 0's optimizer (the others copy its parameters after each step).
    pub opt: AdamW,
    /// The replicas' autodiff devices.
    pub devices: Vec<Device>,
    /// The same devices without autodiff (seeding).
    base: Vec<Device>,
    /// The processes of a data-parallel job (`crate::dist`): this process's replicas are
    /// replicas `rank·len .. (rank+1)·len` of `size·len`.
    pub group: Option<Arc<Group>>,
    /// Sums the encoder layers' gradients over the processes during the backward pass.
    #[cfg(feature = "tch")]
    overlap: Option<Arc<super::overlap::Overlap>>,
}

impl Replicas {
    /// Replicas of `model` and `opt` (replica 0 is them) on `base` (devices without autodiff,
    /// the first being `model`'s).
    pub fn new(model: PretrainModel, opt: AdamW, base: Vec<Device>) -> Result<Self> {
        let devices: Vec<Device> = base.iter().map(|d| d.clone().autodiff()).collect();
        // burn initialises parameters lazily, on first use: draw them now, from the RNG state
        // `train.seed` left, so that every replica starts from the same values (and a run's
        // initial weights do not depend on its number of devices).
        let mut model = model;
        model.walk(&mut ShapeLister::default());
        let mut models = vec![model];
        for d in &devices[1..] {
            let r = models[0].replica(d);
            models.push(r);
        }
        Ok(Self {
            models,
            opt,
            devices,
            base,
            group: None,
            #[cfg(feature = "tch")]
            overlap: None,
        })
    }

    /// Makes these replicas one process of the data-parallel job `group` (one replica per
    /// process); on LibTorch its all-reduce overlaps with the backward pass
    /// (`train::overlap`, built with `tch`).
    pub fn join(&mut self, group: Option<Group>) {
        self.group = group.map(Arc::new);
        #[cfg(feature = "tch")]
        {
            use super::overlap::Overlap;
            self.overlap = match &self.group {
                Some(g) if self.len() == 1 && Overlap::wanted(&self.devices[0]) => {
                    Some(Arc::new(Overlap::new(g.clone())))
                }
                _ => None,
            };
        }
    }

    /// This process's first replica's index among all processes' replicas, and their number.
    fn global(&self) -> (usize, usize) {
        match &self.group {
            Some(g) => (g.world.rank * self.len(), g.world.size * self.len()),
            None => (0, self.len()),
        }
    }

    /// Whether this process writes the run's files (rank 0, or the only process).
    pub fn is_main(&self) -> bool {
        self.group.as_ref().is_none_or(|g| g.world.is_main())
    }

    /// Each replica's share of the micro-batch objective, over every process's replicas.
    pub fn objectives(&self, losses: &[StepLoss]) -> Result<Vec<Tensor<1>>> {
        let Some(g) = &self.group else {
            return Ok(terms::objectives(losses));
        };
        // Summed over the ranks where they are (LibTorch: in place, NCCL on GPUs): no read.
        let totals = super::grads::summed(g, terms::totals(losses, &self.base[0]))?;
        Ok(terms::objectives_of(losses, &totals, self.global().1))
    }

    /// The values of one step's micro-steps (`micro`, still on the device), read and combined
    /// over every process's replicas. Their counters must have been taken out
    /// ([`Replicas::read_counts`] reads them for a window).
    pub fn read(&self, micro: Vec<Pending>) -> Result<StepValues> {
        let mut t = StepValues::default();
        for p in micro {
            let Some(g) = &self.group else {
                t.add(p.read());
                continue;
            };
            let counts = p.mean_counts();
            let local = p.read();
            let mut sums = local.sums(&counts, g.world.is_main());
            g.sum_f64(&mut sums)?;
            t.add(local.from_sums(&sums));
        }
        Ok(t)
    }

    /// The counters of a logging window (`window`, summed on the device), read and summed over
    /// every process.
    pub fn read_counts(&self, window: &mut WindowCounts) -> Result<Counters> {
        let local = window.take();
        let Some(g) = &self.group else {
            return Ok(local);
        };
        let mut v: Vec<f64> = local.values().map(|&c| c as f64).collect();
        g.sum_f64(&mut v)?;
        Ok(local
            .keys()
            .cloned()
            .zip(v)
            .map(|(k, c)| (k, c.round() as u64))
            .collect())
    }

    /// Whether any process raised `flag` (a stop asked of one rank stops all at one step).
    pub fn any(&self, flag: bool) -> Result<bool> {
        let Some(g) = &self.group else {
            return Ok(flag);
        };
        let mut v = [flag as u8 as f64];
        g.sum_f64(&mut v)?;
        Ok(v[0] > 0.0)
    }

    /// Copies rank 0's parameters to every process (they start equal by seed; this makes it
    /// so whatever each process read).
    pub fn broadcast_parameters(&mut self) -> Result<()> {
        let Some(g) = &self.group else {
            return Ok(());
        };
        let mut map = self.models[0].export();
        let mut flat: Vec<f32> = map
            .values()
            .flat_map(|t| t.values.iter().copied())
            .collect();
        g.broadcast_f32(&mut flat)?;
        let mut at = 0;
        for t in map.values_mut() {
            let n = t.values.len();
            t.values.copy_from_slice(&flat[at..at + n]);
            at += n;
        }
        let device = self.devices[0].clone();
        let map = crate::interop::tensors::TensorMap {
            tensors: map,
            source: "rank 0's parameters".into(),
        };
        self.models[0].load(&map, &device)
    }

    pub fn len(&self) -> usize {
        self.models.len()
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// Replica 0's model without autodiff (so without dropout) and its device: what a
    /// held-out evaluation runs.
    /// Replica 0's device without autodiff, where its evaluation copy lives.
    pub fn eval_device(&self) -> &Device {
        &self.base[0]
    }

    pub fn eval_model(&self) -> (PretrainModel, Device) {
        (self.models[0].valid(), self.base[0].clone())
    }

    /// The forward passes of one micro-step over a micro-batch of `rows` rows:
    /// `forward(model, device, shard)` for each replica, with its random draws seeded first.
    pub fn forward(
        &self,
        step_seed: u64,
        rows: usize,
        forward: impl FnMut(&PretrainModel, &Device, Range<usize>) -> StepLoss,
    ) -> Vec<StepLoss> {
        self.forward_with(Some(step_seed), rows, forward)
    }

    /// This process's one replica's rows of a micro-batch of `rows` rows.
    pub fn rows(&self, rows: usize) -> Range<usize> {
        assert_eq!(self.len(), 1, "one replica per process");
        let (first, all) = self.global();
        let share = rows / all;
        first * share..(first + 1) * share
    }

    /// Seeds the random draws of this process's one replica for the micro-step seeded
    /// `step_seed`: what a recorded step's replay draws from.
    pub fn seed(&self, step_seed: u64) {
        assert_eq!(self.len(), 1, "one replica per process");
        let (first, _) = self.global();
        crate::model::seed(&self.base[0], replica_seed(step_seed, first));
    }

    /// [`Replicas::forward`] of this process's one replica, its draws seeded already
    /// ([`Replicas::seed`]; seeding inside a recorded step is not allowed).
    pub fn forward_seeded(
        &self,
        rows: usize,
        forward: impl FnMut(&PretrainModel, &Device, Range<usize>) -> StepLoss,
    ) -> Vec<StepLoss> {
        assert_eq!(self.len(), 1, "one replica per process");
        self.forward_with(None, rows, forward)
    }

    /// The replicas' forward passes, each seeded just before it (burn's seed is one per
    /// process) unless `step_seed` is `None`.
    fn forward_with(
        &self,
        step_seed: Option<u64>,
        rows: usize,
        mut forward: impl FnMut(&PretrainModel, &Device, Range<usize>) -> StepLoss,
    ) -> Vec<StepLoss> {
        let (first, all) = self.global();
        let share = rows / all;
        (0..self.len())
            .map(|r| {
                let g = first + r;
                if let Some(s) = step_seed {
                    crate::model::seed(&self.base[r], replica_seed(s, g));
                }
                let rows = g * share..(g + 1) * share;
                #[cfg(feature = "tch")]
                if let Some(o) = &self.overlap {
                    o.begin_forward();
                    let sink: Arc<dyn crate::kernels::grad_watch::GradSink> = o.clone();
                    return crate::kernels::grad_watch::watching(sink, || {
                        forward(&self.models[r], &self.devices[r], rows)
                    });
                }
                forward(&self.models[r], &self.devices[r], rows)
            })
            .collect()
    }

    /// The backward passes of the replicas' `objectives`: the gradients summed over every
    /// process's replicas.
    pub fn backward(&mut self, objectives: &[Tensor<1>]) -> Result<Grads> {
        #[cfg(feature = "tch")]
        if let (Some(o), Some(g)) = (&self.overlap, &self.group) {
            o.begin_backward(&self.base[0]);
            let grads = objectives[0].backward();
            let summed = o.finish()?;
            let model = &mut self.models[0];
            let (mut rest, done) = Grads::collect_except(&grads, |w| model.walk(w), &summed);
            rest.all_reduce(g)?;
            rest.entries.extend(done.entries);
            return Ok(rest);
        }
        let mut sum: Option<Grads> = None;
        for (o, m) in objectives.iter().zip(self.models.iter_mut()) {
            let g = o.backward();
            let g = Grads::collect(&g, |w| m.walk(w)).to_device(&self.devices[0]);
            match &mut sum {
                Some(s) => s.accumulate(g),
                None => sum = Some(g),
            }
        }
        let mut sum = sum.expect("at least one replica");
        if let Some(g) = &self.group {
            sum.all_reduce(g)?;
        }
        Ok(sum)
    }

    /// One optimizer step with the micro-steps' summed `grads`: averaged over `grad_accum`
    /// micro-steps, clipped to `max_norm`, applied at `lr`. Returns the gradient norm before
    /// clipping, on the device (`None` without gradients).
    pub fn update(
        &mut self,
        mut grads: Grads,
        grad_accum: usize,
        max_norm: f64,
        lr: f64,
    ) -> Option<Tensor<1>> {
        if grad_accum > 1 {
            grads.scale(1.0 / grad_accum as f64);
        }
        let norm = grads.clip_global_norm(max_norm);
        let m = &mut self.models[0];
        self.opt.update(lr, &grads, |w| m.walk(w));
        for r in 1..self.len() {
            self.models[r] = self.models[0].replica(&self.devices[r]);
        }
        norm
    }
}
