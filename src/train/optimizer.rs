//! AdamW with decoupled weight decay (torch's `AdamW` update, bit for bit in f32 up to
//! operation order), global-norm gradient clipping and the warmup + linear-decay schedule.
//!
//! Per parameter, at update t (1-based) with gradient g:
//! `p ← p·(1 − lr·wd)`, `m ← β1·m + (1−β1)·g`, `v ← β2·v + (1−β2)·g²`,
//! `p ← p − lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + ε)`; without bias correction
//! (`bias_correction = false`, ELECTRA's `AdamWeightDecayOptimizer`) both divisors are 1.
//! Weight decay is skipped for LayerNorm parameters and biases when `decay_all` is false
//! (ELECTRA's and BERT's rule).
//!
//! Two implementations of the same update:
//! - per tensor (the CPU default): on the `flex` backend one fused pass per parameter
//!   (`kernels::adamw`, moments updated in place); elsewhere about a dozen element-wise ops;
//! - multi-tensor (the GPU default, `multi_tensor`): the gradients and the parameters are
//!   concatenated into one flat buffer each, the moments live in flat buffers, the update is
//!   the same dozen ops once over the flat buffers, and every parameter becomes a slice of the
//!   updated flat buffer. A step then launches a few dozen kernels instead of a dozen per
//!   parameter (about 2,500 for ELECTRA-Small), which is what bounds a GPU step.
//!
//! Both store the moments in checkpoints the same way (`m.<name>`, `v.<name>`, flat), so a run
//! can resume under either.

use std::collections::{BTreeMap, HashMap};

use burn::module::Param;
use burn::prelude::*;

use crate::interop::tensors::HostTensor;
use crate::kernels::{self, AdamWStep};
use crate::model::params::{Matrix, ParamWalker, replace, update_value};
use crate::{Error, Result};

pub use super::adamw_config::{AdamWConfig, MultiTensor};
pub use super::grads::Grads;
pub use super::schedule::{LrSchedule, product_lr, scheduled_lr};

/// AdamW state: step count and first / second moments, by parameter name (per-tensor path)
/// or in flat buffers (multi-tensor path; converted on demand when the path or the set of
/// parameters changes).
pub struct AdamW {
    pub config: AdamWConfig,
    pub step: u64,
    moments: HashMap<String, (Tensor<1>, Tensor<1>)>,
    flat: Option<Flat>,
    /// Set by [`AdamW::stage`]: the update of a recorded (CUDA-graph) step.
    graph: Option<Staged>,
    /// The multi-tensor path's flat parameter buffer, registered for one bf16 cast of all the
    /// parameters per step (`kernels::param_cast`).
    casts: kernels::param_cast::FlatParams,
    /// Parameters (whole names) that take no weight decay besides biases and LayerNorm: a
    /// training step's own ([`AdamW::sparing`]).
    undecayed: &'static [&'static str],
}

/// The staged step's factors as device scalars (`[1]` each), slices of [`Staged::factors`].
struct StagedFactors {
    /// lr / (1 − β1^t).
    step: Tensor<1>,
    /// 1 / sqrt(1 − β2^t).
    inv_bc2_sqrt: Tensor<1>,
    lr: Tensor<1>,
}

/// The state of an update that a CUDA graph records ([`AdamW::stage`]).
struct Staged {
    /// `[lr/(1−β1^t), 1/sqrt(1−β2^t), lr]` of the staged step, on the device (the scalars the
    /// unrecorded update multiplies by, rounded to f32 the same way).
    factors: Tensor<1>,
    /// The flat buffer every parameter is a slice of, rewritten in place by each update.
    params: Option<Tensor<1>>,
}

impl Staged {
    /// The staged step's factors, each a `[1]` slice of [`Staged::factors`].
    fn scalars(&self) -> StagedFactors {
        let at = |i: usize| self.factors.clone().slice(i..i + 1);
        StagedFactors {
            step: at(0),
            inv_bc2_sqrt: at(1),
            lr: at(2),
        }
    }
}

/// One parameter's place in the flat buffers.
#[derive(Clone, Debug, PartialEq)]
struct Slot {
    name: String,
    offset: usize,
    len: usize,
}

/// Multi-tensor state: moments of every parameter in one buffer each, in `layout` order, and
/// the per-element factors that only change with the layout and the learning-rate scales.
struct Flat {
    layout: Vec<Slot>,
    m: Tensor<1>,
    v: Tensor<1>,
    /// The per-parameter learning-rate scales the factors below were built for.
    scales: Vec<f64>,
    /// Per element: scale (`None` when every scale is 1).
    scale: Option<Tensor<1>>,
    /// Per element: scale · weight decay (`None` when no parameter decays).
    decay: Option<Tensor<1>>,
}

impl Flat {
    /// [`Flat::store`], then registers the parameters' new flat buffer with `casts` (the next
    /// step's bf16 casts come from it).
    fn keep(
        &mut self,
        staged: Option<&mut Staged>,
        casts: &kernels::param_cast::FlatParams,
        m: Tensor<1>,
        v: Tensor<1>,
        p: Tensor<1>,
    ) -> Tensor<1> {
        let p = self.store(staged, m, v, p);
        casts.set(&p);
        p
    }

    /// Keeps the new moments `m`, `v` and returns the parameters' new flat buffer `p`: a
    /// staged update ([`AdamW::stage`]) writes them into the memory the last one used.
    fn store(
        &mut self,
        staged: Option<&mut Staged>,
        m: Tensor<1>,
        v: Tensor<1>,
        p: Tensor<1>,
    ) -> Tensor<1> {
        let Some(g) = staged else {
            self.m = m;
            self.v = v;
            return p;
        };
        kernels::cuda_graph::copy_into(&self.m, &m);
        kernels::cuda_graph::copy_into(&self.v, &v);
        match &g.params {
            Some(fixed) => {
                kernels::cuda_graph::copy_into(fixed, &p);
                fixed.clone()
            }
            None => {
                g.params = Some(p.clone());
                p
            }
        }
    }

    /// Builds the per-element factors of the learning-rate `scales` (one per slot) and of the
    /// weight decay (`c`'s, but not on the step's `undecayed` parameters), over `len` elements.
    fn set_scales(
        &mut self,
        scales: Vec<f64>,
        len: usize,
        c: &AdamWConfig,
        undecayed: &[&str],
        device: &Device,
    ) {
        let per_element = |f: &dyn Fn(&Slot, f64) -> f32| {
            let mut values = Vec::with_capacity(len);
            for (s, &k) in self.layout.iter().zip(&scales) {
                values.extend(std::iter::repeat_n(f(s, k), s.len));
            }
            Tensor::<1>::from_data(TensorData::new(values, [len]), device)
        };
        let wd = |s: &Slot| {
            if decays(&s.name, c, undecayed) {
                c.weight_decay
            } else {
                0.0
            }
        };
        self.scale = scales
            .iter()
            .any(|&k| k != 1.0)
            .then(|| per_element(&|_, k| k as f32));
        self.decay = self
            .layout
            .iter()
            .any(|s| wd(s) != 0.0)
            .then(|| per_element(&|s, k| (k * wd(s)) as f32));
        self.scales = scales;
    }

    /// Per-name moments, as the per-tensor path and checkpoints keep them.
    fn split(&self) -> impl Iterator<Item = (String, (Tensor<1>, Tensor<1>))> + '_ {
        self.layout.iter().map(|s| {
            let r = s.offset..s.offset + s.len;
            (
                s.name.clone(),
                (self.m.clone().slice(r.clone()), self.v.clone().slice(r)),
            )
        })
    }
}

/// The slots of `params` (name, flat values) one after another in one buffer, in their order.
fn layout_of(params: &[(String, Tensor<1>)]) -> Vec<Slot> {
    let mut layout = Vec::with_capacity(params.len());
    let mut offset = 0;
    for (name, p) in params {
        let len = p.dims()[0];
        layout.push(Slot {
            name: name.clone(),
            offset,
            len,
        });
        offset += len;
    }
    layout
}

/// Whether parameter `name` takes weight decay under `c`: not biases, LayerNorm parameters or
/// the `undecayed` ones (a training step's), unless `decay_all`.
fn decays(name: &str, c: &AdamWConfig, undecayed: &[&str]) -> bool {
    c.decay_all
        || !(name.ends_with(".bias") || name.contains("LayerNorm") || undecayed.contains(&name))
}

impl AdamW {
    pub fn new(config: AdamWConfig) -> Self {
        Self {
            config,
            step: 0,
            moments: HashMap::new(),
            flat: None,
            graph: None,
            casts: Default::default(),
            undecayed: &[],
        }
    }

    /// The optimizer with `undecayed` (whole parameter names, a training step's
    /// [`StepKind::undecayed`](super::step_kind::StepKind::undecayed)) taking no weight decay
    /// either.
    pub fn sparing(mut self, undecayed: &'static [&'static str]) -> Self {
        self.undecayed = undecayed;
        self
    }

    /// `(1 − β1^t, sqrt(1 − β2^t))` at the current step t (1 and 1 without bias correction).
    fn bias_corrections(&self) -> (f64, f64) {
        let (c, t) = (&self.config, self.step as i32);
        if c.bias_correction {
            (1.0 - c.beta1.powi(t), (1.0 - c.beta2.powi(t)).sqrt())
        } else {
            (1.0, 1.0)
        }
    }

    /// Prepares the next update for a recorded step (CUDA graph, `kernels::cuda_graph`): the
    /// step count advances here instead of in the update, the update's step-dependent factors
    /// (learning rate `lr`, bias corrections) go into a device tensor the update reads, and
    /// from now on the update writes the new parameters and moments into the memory it read
    /// them from, so that a replay of it reads the last one's results. Call it before each
    /// update or replay; multi-tensor path only.
    pub fn stage(&mut self, lr: f64, device: &Device) {
        self.step += 1;
        let (bc1, bc2_sqrt) = self.bias_corrections();
        let values = vec![(lr / bc1) as f32, 1.0 / (bc2_sqrt as f32), lr as f32];
        let factors = Tensor::<1>::from_data(TensorData::new(values, [3]), device);
        match &self.graph {
            Some(g) => kernels::cuda_graph::copy_into(&g.factors, &factors),
            None => {
                self.graph = Some(Staged {
                    factors,
                    params: None,
                })
            }
        }
    }

    /// Moves flat moments (if any) back to the per-name map.
    fn unflatten(&mut self) {
        if let Some(flat) = self.flat.take() {
            self.moments.extend(flat.split());
        }
    }

    /// Applies one update with learning rate `lr` to every walked parameter that has a gradient.
    pub fn update(&mut self, lr: f64, grads: &Grads, walk: impl FnMut(&mut dyn ParamWalker)) {
        self.update_scaled(lr, &|_| 1.0, grads, walk)
    }

    /// [`AdamW::update`] with a per-parameter learning-rate factor (layer-wise decay).
    pub fn update_scaled(
        &mut self,
        lr: f64,
        lr_scale: &dyn Fn(&str) -> f64,
        grads: &Grads,
        mut walk: impl FnMut(&mut dyn ParamWalker),
    ) {
        if self.graph.is_none() {
            self.step += 1;
        }
        // The parameters' casts are done with (the backward pass has run): their memory is free
        // for the update's temporaries.
        self.casts.clear();
        let c = self.config.clone();
        let (bc1, bc2_sqrt) = self.bias_corrections();
        let multi = self.graph.is_some()
            || match c.multi_tensor {
                MultiTensor::On => true,
                MultiTensor::Off => false,
                MultiTensor::Auto => grads
                    .entries
                    .values()
                    .next()
                    .is_some_and(|e| !crate::kernels::on_host(&e.grad.device())),
            };
        if multi {
            self.update_flat(lr, lr_scale, grads, bc1, bc2_sqrt, &mut walk);
            return;
        }
        self.unflatten();
        let mut stepper = Stepper {
            opt: self,
            grads,
            lr,
            lr_scale,
            bc1,
            bc2_sqrt,
            c,
        };
        walk(&mut stepper);
    }

    /// The multi-tensor update: see the module documentation.
    fn update_flat(
        &mut self,
        lr: f64,
        lr_scale: &dyn Fn(&str) -> f64,
        grads: &Grads,
        bc1: f64,
        bc2_sqrt: f64,
        walk: &mut dyn FnMut(&mut dyn ParamWalker),
    ) {
        // Pass 1: the parameters that have a gradient, in walk order.
        let mut params = Collect {
            grads,
            found: Vec::new(),
        };
        walk(&mut params);
        let Some((_, first)) = params.found.first() else {
            return;
        };
        let device = first.device();
        let layout = layout_of(&params.found);
        let offset = layout.last().map_or(0, |s| s.offset + s.len);
        let scales: Vec<f64> = layout.iter().map(|s| lr_scale(&s.name)).collect();
        let c = self.config.clone();
        if self.flat.as_ref().is_none_or(|f| f.layout != layout) {
            self.unflatten();
            let (m, v): (Vec<_>, Vec<_>) = layout
                .iter()
                .map(|s| {
                    self.moments.remove(&s.name).unwrap_or_else(|| {
                        let z = Tensor::<1>::zeros([s.len], &device);
                        (z.clone(), z)
                    })
                })
                .unzip();
            self.flat = Some(Flat {
                layout: layout.clone(),
                m: Tensor::cat(m, 0),
                v: Tensor::cat(v, 0),
                scales: Vec::new(),
                scale: None,
                decay: None,
            });
        }
        let flat = self.flat.as_mut().expect("flat state");
        // A new layout starts with no scales, so the factors are built at its first step.
        if flat.scales != scales {
            flat.set_scales(scales, offset, &c, self.undecayed, &device);
        }

        let g = grads.clipped(Tensor::cat(
            layout
                .iter()
                .map(|s| grads.entries[&s.name].grad.clone())
                .collect(),
            0,
        ));
        let p = Tensor::cat(params.found.into_iter().map(|(_, p)| p).collect(), 0);
        let f = grads.factor;
        let m = flat.m.clone().mul_scalar(c.beta1) + g.clone().mul_scalar((1.0 - c.beta1) * f);
        let v = flat.v.clone().mul_scalar(c.beta2) + g.square().mul_scalar((1.0 - c.beta2) * f * f);
        // The step-dependent factors: host scalars, or a staged step's device values.
        let staged = self.graph.as_ref().map(Staged::scalars);
        let p = match (&flat.decay, staged.as_ref().map(|f| f.lr.clone())) {
            // p · (1 − lr·scale·wd)
            (Some(d), None) => p * d.clone().mul_scalar(-lr).add_scalar(1.0),
            (Some(d), Some(lr)) => p * (d.clone() * lr).neg().add_scalar(1.0),
            (None, _) => p,
        };
        let root = v.clone().sqrt();
        let denom = match staged.as_ref().map(|f| f.inv_bc2_sqrt.clone()) {
            None => root.div_scalar(bc2_sqrt),
            Some(inv) => root * inv,
        }
        .add_scalar(c.eps);
        let step = match staged.map(|f| f.step) {
            None => (m.clone() / denom).mul_scalar(lr / bc1),
            Some(f) => (m.clone() / denom) * f,
        };
        let step = match &flat.scale {
            Some(s) => step * s.clone(),
            None => step,
        };
        let p = flat.keep(self.graph.as_mut(), &self.casts, m, v, p - step);

        // Pass 2: every parameter becomes its slice of the updated buffer.
        let mut setter = SetFlat {
            flat: p,
            slots: flat
                .layout
                .iter()
                .map(|s| (s.name.clone(), s.offset..s.offset + s.len))
                .collect(),
        };
        walk(&mut setter);
    }

    /// The state as host tensors (`m.<name>`, `v.<name>`) for a checkpoint.
    pub fn state(&self) -> BTreeMap<String, HostTensor> {
        let mut out = BTreeMap::new();
        let flat = self.flat.iter().flat_map(|f| f.split());
        for (k, (m, v)) in self
            .moments
            .iter()
            .map(|(k, mv)| (k.clone(), mv.clone()))
            .chain(flat)
        {
            out.insert(format!("m.{k}"), HostTensor::from_tensor(m));
            out.insert(format!("v.{k}"), HostTensor::from_tensor(v));
        }
        out
    }

    /// Restores moments written by [`AdamW::state`].
    pub fn load_state(
        &mut self,
        step: u64,
        state: &BTreeMap<String, HostTensor>,
        device: &Device,
    ) -> Result<()> {
        self.step = step;
        self.moments.clear();
        self.flat = None;
        for (k, m) in state {
            let Some(name) = k.strip_prefix("m.") else {
                continue;
            };
            let v = state
                .get(&format!("v.{name}"))
                .ok_or_else(|| Error::Checkpoint(format!("optimizer state: `v.{name}` missing")))?;
            self.moments
                .insert(name.to_string(), (m.to_tensor(device), v.to_tensor(device)));
        }
        Ok(())
    }
}

struct Stepper<'a> {
    opt: &'a mut AdamW,
    grads: &'a Grads,
    lr: f64,
    lr_scale: &'a dyn Fn(&str) -> f64,
    bc1: f64,
    bc2_sqrt: f64,
    c: AdamWConfig,
}

impl Stepper<'_> {
    /// The parameter's new value; `name` has a gradient.
    fn new_value(&mut self, name: &str, p: Tensor<1>) -> Tensor<1> {
        let g = &self.grads.entries[name].grad;
        let lr = self.lr * (self.lr_scale)(name);
        let c = &self.c;
        let (m, v) = self
            .opt
            .moments
            .remove(name)
            .unwrap_or_else(|| (g.zeros_like(), g.zeros_like()));
        let f = self.grads.factor;
        let wd = if decays(name, c, self.opt.undecayed) {
            c.weight_decay
        } else {
            0.0
        };
        let step = AdamWStep {
            lr,
            weight_decay: wd,
            beta1: c.beta1,
            beta2: c.beta2,
            eps: c.eps,
            bc1: self.bc1,
            bc2_sqrt: self.bc2_sqrt,
            grad_factor: f,
        };
        // Moments restored from a checkpoint may sit on the autodiff device; the update takes
        // plain tensors.
        let g = self.grads.clipped(g.clone().inner());
        let (p, m, v) = kernels::adamw(p, g, m.inner(), v.inner(), step);
        self.opt.moments.insert(name.to_string(), (m, v));
        p
    }
}

// The value is handed to the update alone (`update_value`), so that the fused kernel writes
// it in place where nothing else holds it.
impl ParamWalker for Stepper<'_> {
    fn matrix(&mut self, name: &str, _kind: Matrix, param: &mut Param<Tensor<2>>) {
        if !self.grads.entries.contains_key(name) {
            return;
        }
        update_value(param, |p| {
            let dims = p.dims();
            self.new_value(name, p.reshape([dims[0] * dims[1]]))
                .reshape(dims)
        });
    }
    fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>) {
        if self.grads.entries.contains_key(name) {
            update_value(param, |p| self.new_value(name, p));
        }
    }
}

/// Multi-tensor pass 1: each parameter with a gradient, flattened, in walk order.
struct Collect<'a> {
    grads: &'a Grads,
    found: Vec<(String, Tensor<1>)>,
}

impl ParamWalker for Collect<'_> {
    fn matrix(&mut self, name: &str, _kind: Matrix, param: &mut Param<Tensor<2>>) {
        if self.grads.entries.contains_key(name) {
            let p = param.val().inner();
            let [r, c] = p.dims();
            self.found.push((name.to_string(), p.reshape([r * c])));
        }
    }
    fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>) {
        if self.grads.entries.contains_key(name) {
            self.found.push((name.to_string(), param.val().inner()));
        }
    }
}

/// Multi-tensor pass 2: sets each parameter to its range of the updated flat buffer.
struct SetFlat {
    flat: Tensor<1>,
    slots: HashMap<String, std::ops::Range<usize>>,
}

impl ParamWalker for SetFlat {
    fn matrix(&mut self, name: &str, _kind: Matrix, param: &mut Param<Tensor<2>>) {
        if let Some(r) = self.slots.get(name) {
            let dims = param.val().dims();
            replace(param, self.flat.clone().slice(r.clone()).reshape(dims));
        }
    }
    fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>) {
        if let Some(r) = self.slots.get(name) {
            replace(param, self.flat.clone().slice(r.clone()));
        }
    }
}
