//! AdamW with decoupled weight decay (torch's `AdamW` update, bit for bit in f32 up to
//! operation order), global-norm gradient clipping and the warmup + linear-decay schedule.
//!
//! Per parameter, at update t (1-based) with gradient g:
//! `p ← p·(1 − lr·wd)`, `m ← β1·m + (1−β1)·g`, `v ← β2·v + (1−β2)·g²`,
//! `p ← p − lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + ε)`.
//! Weight decay is skipped for LayerNorm parameters and biases when `decay_all` is false
//! (ELECTRA's and BERT's rule).

use std::collections::{BTreeMap, HashMap};

use burn::module::Param;
use burn::prelude::*;
use burn::tensor::Gradients;
use serde::{Deserialize, Serialize};

use crate::interop::tensors::HostTensor;
use crate::model::params::{Matrix, ParamWalker, replace};
use crate::{Error, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamWConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Apply weight decay to LayerNorm weights and biases too (torch's default param group).
    pub decay_all: bool,
    /// Global gradient-norm clip; 0 disables.
    pub max_grad_norm: f64,
    pub warmup_steps: u64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        Self {
            lr: 5e-4,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-6,
            weight_decay: 0.01,
            decay_all: false,
            max_grad_norm: 1.0,
            warmup_steps: 10_000,
        }
    }
}

/// Learning rate after `step` completed updates of `total`: linear warmup from 0, then linear
/// decay to 0 at `total` (transformers' `get_linear_schedule_with_warmup`).
pub fn scheduled_lr(base: f64, step: u64, warmup: u64, total: u64) -> f64 {
    if step < warmup {
        return base * step as f64 / warmup.max(1) as f64;
    }
    let left = total.saturating_sub(step) as f64;
    base * (left / (total.saturating_sub(warmup)).max(1) as f64).max(0.0)
}

/// Flattened gradients by parameter name (no autodiff), ready for clipping and the update.
#[derive(Clone, Default)]
pub struct Grads {
    pub entries: BTreeMap<String, (Tensor<1>, Vec<usize>, Option<Matrix>)>,
}

impl Grads {
    /// Reads the gradient of every parameter a model walks (`walk` is e.g. `|w| model.walk(w)`).
    pub fn collect(grads: &Gradients, walk: impl FnOnce(&mut dyn ParamWalker)) -> Self {
        struct Collector<'a>(&'a Gradients, Grads);
        impl ParamWalker for Collector<'_> {
            fn matrix(&mut self, name: &str, kind: Matrix, param: &mut Param<Tensor<2>>) {
                if let Some(g) = param.val().grad(self.0) {
                    let dims = g.dims().to_vec();
                    let n: usize = dims.iter().product();
                    self.1
                        .entries
                        .insert(name.into(), (g.reshape([n]), dims, Some(kind)));
                }
            }
            fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>) {
                if let Some(g) = param.val().grad(self.0) {
                    let dims = g.dims().to_vec();
                    self.1.entries.insert(name.into(), (g, dims, None));
                }
            }
        }
        let mut c = Collector(grads, Grads::default());
        walk(&mut c);
        c.1
    }

    /// Adds another set of gradients (gradient accumulation).
    pub fn accumulate(&mut self, other: Grads) {
        for (k, (g, dims, kind)) in other.entries {
            match self.entries.get_mut(&k) {
                Some(e) => e.0 = e.0.clone() + g,
                None => {
                    self.entries.insert(k, (g, dims, kind));
                }
            }
        }
    }

    pub fn scale(&mut self, factor: f64) {
        for e in self.entries.values_mut() {
            e.0 = e.0.clone().mul_scalar(factor);
        }
    }

    /// The global L2 norm over all gradients (one host sync).
    pub fn global_norm(&self) -> f64 {
        let parts: Vec<Tensor<1>> = self
            .entries
            .values()
            .map(|(g, _, _)| g.clone().square().sum())
            .collect();
        if parts.is_empty() {
            return 0.0;
        }
        let total: f32 = Tensor::cat(parts, 0).sum().into_scalar::<f32>();
        (total as f64).sqrt()
    }

    /// Clips to `max_norm` like torch's `clip_grad_norm_`; returns the norm before clipping.
    pub fn clip_global_norm(&mut self, max_norm: f64) -> f64 {
        let norm = self.global_norm();
        if max_norm > 0.0 && norm.is_finite() {
            let coef = max_norm / (norm + 1e-6);
            if coef < 1.0 {
                self.scale(coef);
            }
        }
        norm
    }

    /// One gradient in transformers' layout (Linear weights as [out, in]).
    pub fn host(&self, name: &str) -> Option<HostTensor> {
        let (g, dims, kind) = self.entries.get(name)?;
        let t = HostTensor {
            shape: dims.clone(),
            values: HostTensor::from_tensor(g.clone()).values,
        };
        Some(if *kind == Some(Matrix::Linear) {
            t.transposed()
        } else {
            t
        })
    }
}

/// AdamW state: step count and first / second moments by parameter name.
pub struct AdamW {
    pub config: AdamWConfig,
    pub step: u64,
    moments: HashMap<String, (Tensor<1>, Tensor<1>)>,
}

fn no_decay(name: &str) -> bool {
    name.ends_with(".bias") || name.contains("LayerNorm")
}

impl AdamW {
    pub fn new(config: AdamWConfig) -> Self {
        Self {
            config,
            step: 0,
            moments: HashMap::new(),
        }
    }

    /// Applies one update with learning rate `lr` to every walked parameter that has a gradient.
    pub fn update(&mut self, lr: f64, grads: &Grads, walk: impl FnOnce(&mut dyn ParamWalker)) {
        self.update_scaled(lr, &|_| 1.0, grads, walk)
    }

    /// [`AdamW::update`] with a per-parameter learning-rate factor (layer-wise decay).
    pub fn update_scaled(
        &mut self,
        lr: f64,
        lr_scale: &dyn Fn(&str) -> f64,
        grads: &Grads,
        walk: impl FnOnce(&mut dyn ParamWalker),
    ) {
        self.step += 1;
        let c = self.config.clone();
        let t = self.step as i32;
        let bc1 = 1.0 - c.beta1.powi(t);
        let bc2_sqrt = (1.0 - c.beta2.powi(t)).sqrt();
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

    /// The state as host tensors (`m.<name>`, `v.<name>`) for a checkpoint.
    pub fn state(&self) -> BTreeMap<String, HostTensor> {
        let mut out = BTreeMap::new();
        for (k, (m, v)) in &self.moments {
            out.insert(format!("m.{k}"), HostTensor::from_tensor(m.clone()));
            out.insert(format!("v.{k}"), HostTensor::from_tensor(v.clone()));
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
    fn new_value(&mut self, name: &str, p: Tensor<1>) -> Option<Tensor<1>> {
        let (g, _, _) = self.grads.entries.get(name)?;
        let lr = self.lr * (self.lr_scale)(name);
        let c = &self.c;
        let (m, v) = self
            .opt
            .moments
            .remove(name)
            .unwrap_or_else(|| (g.zeros_like(), g.zeros_like()));
        let m = m.mul_scalar(c.beta1) + g.clone().mul_scalar(1.0 - c.beta1);
        let v = v.mul_scalar(c.beta2) + g.clone().square().mul_scalar(1.0 - c.beta2);
        let wd = if c.decay_all || !no_decay(name) {
            c.weight_decay
        } else {
            0.0
        };
        let p = if wd != 0.0 {
            p.mul_scalar(1.0 - lr * wd)
        } else {
            p
        };
        let denom = v.clone().sqrt().div_scalar(self.bc2_sqrt).add_scalar(c.eps);
        let p = p - (m.clone() / denom).mul_scalar(lr / self.bc1);
        self.opt.moments.insert(name.to_string(), (m, v));
        Some(p)
    }
}

impl ParamWalker for Stepper<'_> {
    fn matrix(&mut self, name: &str, _kind: Matrix, param: &mut Param<Tensor<2>>) {
        let p = param.val().inner();
        let dims = p.dims();
        if let Some(new) = self.new_value(name, p.reshape([dims[0] * dims[1]])) {
            replace(param, new.reshape(dims));
        }
    }
    fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>) {
        let p = param.val().inner();
        if let Some(new) = self.new_value(name, p) {
            replace(param, new);
        }
    }
}
