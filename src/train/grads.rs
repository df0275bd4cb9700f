//! A step's gradients, flattened by parameter name: collected from burn's autodiff, summed
//! over micro-batches and replicas, scaled and clipped by their global norm.

use std::collections::{BTreeMap, HashMap};

use burn::module::{Param, ParamId};
use burn::prelude::*;
use burn::tensor::Gradients;

use crate::interop::tensors::HostTensor;
use crate::model::params::{Matrix, ParamWalker};

/// One parameter's gradient, flattened: its values, the parameter's shape and, for a matrix,
/// its kind (how transformers lays it out).
#[derive(Clone)]
pub struct GradEntry {
    pub grad: Tensor<1>,
    pub dims: Vec<usize>,
    pub kind: Option<Matrix>,
}

/// Flattened gradients by parameter name (no autodiff), ready for clipping and the update.
/// The true gradient of `name` is `factor · clip · entries[name]`: scaling (averaging over
/// micro-batches) only changes `factor`, which the update folds into its own constants;
/// clipping sets `clip`, a `[1]` tensor on the device (so that no norm is read back), which the
/// update multiplies in.
#[derive(Clone)]
pub struct Grads {
    pub entries: BTreeMap<String, GradEntry>,
    pub factor: f64,
    pub clip: Option<Tensor<1>>,
}

impl Default for Grads {
    fn default() -> Self {
        Self {
            entries: BTreeMap::new(),
            factor: 1.0,
            clip: None,
        }
    }
}

impl Grads {
    /// Reads the gradient of every parameter a model walks (`walk` is e.g. `|w| model.walk(w)`).
    pub fn collect(grads: &Gradients, walk: impl FnOnce(&mut dyn ParamWalker)) -> Self {
        Self::collect_except(grads, walk, &HashMap::new()).0
    }

    /// [`Grads::collect`], except that the parameters in `summed` (flat gradients by parameter,
    /// summed over the processes already) are taken from there: (the others, those).
    pub fn collect_except(
        grads: &Gradients,
        walk: impl FnOnce(&mut dyn ParamWalker),
        summed: &HashMap<ParamId, Tensor<1>>,
    ) -> (Self, Self) {
        struct Collector<'a> {
            grads: &'a Gradients,
            summed: &'a HashMap<ParamId, Tensor<1>>,
            rest: Grads,
            done: Grads,
        }
        impl Collector<'_> {
            fn add<const D: usize>(
                &mut self,
                name: &str,
                p: &Param<Tensor<D>>,
                kind: Option<Matrix>,
            ) {
                if let Some(g) = self.summed.get(&p.id) {
                    let entry = GradEntry {
                        grad: g.clone(),
                        dims: p.val().dims().to_vec(),
                        kind,
                    };
                    self.done.entries.insert(name.into(), entry);
                } else if let Some(g) = p.val().grad(self.grads) {
                    let dims = g.dims().to_vec();
                    let n: usize = dims.iter().product();
                    let entry = GradEntry {
                        grad: g.reshape([n]),
                        dims,
                        kind,
                    };
                    self.rest.entries.insert(name.into(), entry);
                }
            }
        }
        impl ParamWalker for Collector<'_> {
            fn matrix(&mut self, name: &str, kind: Matrix, param: &mut Param<Tensor<2>>) {
                self.add(name, param, Some(kind));
            }
            fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>) {
                self.add(name, param, None);
            }
        }
        let mut c = Collector {
            grads,
            summed,
            rest: Grads::default(),
            done: Grads::default(),
        };
        walk(&mut c);
        (c.rest, c.done)
    }

    /// Multiplies every entry by `factor` and `clip` (and resets them).
    fn materialise(&mut self) {
        if self.factor != 1.0 {
            for e in self.entries.values_mut() {
                e.grad = e.grad.clone().mul_scalar(self.factor);
            }
            self.factor = 1.0;
        }
        if let Some(c) = self.clip.take() {
            for e in self.entries.values_mut() {
                e.grad = e.grad.clone() * c.clone();
            }
        }
    }

    /// `g` (a flattened entry) times the clipping coefficient, if any.
    pub fn clipped(&self, g: Tensor<1>) -> Tensor<1> {
        match &self.clip {
            Some(c) => {
                let c = c.clone().to_device(&g.device());
                g * c
            }
            None => g,
        }
    }

    /// The same gradients on `device` (a replica's).
    pub fn to_device(&self, device: &Device) -> Self {
        Self {
            entries: self
                .entries
                .iter()
                .map(|(k, e)| {
                    let moved = GradEntry {
                        grad: e.grad.clone().to_device(device),
                        ..e.clone()
                    };
                    (k.clone(), moved)
                })
                .collect(),
            factor: self.factor,
            clip: self.clip.as_ref().map(|c| c.clone().to_device(device)),
        }
    }

    /// Adds another set of gradients (gradient accumulation).
    pub fn accumulate(&mut self, mut other: Grads) {
        if self.factor != other.factor || self.clip.is_some() || other.clip.is_some() {
            self.materialise();
            other.materialise();
        }
        for (k, o) in other.entries {
            match self.entries.get_mut(&k) {
                Some(e) => e.grad = e.grad.clone() + o.grad,
                None => {
                    self.entries.insert(k, o);
                }
            }
        }
    }

    /// Sums the gradients over the processes of `group`, in place: one flat buffer in
    /// parameter-name order, all-reduced in buckets ([`crate::dist::BUCKET`]) on its device
    /// (LibTorch: Gloo on the CPU, NCCL on GPUs), or read from the device once and put back
    /// once (other backends).
    pub fn all_reduce(&mut self, group: &crate::dist::Group) -> crate::Result<()> {
        self.materialise();
        if self.entries.is_empty() {
            return Ok(());
        }
        let flat = Tensor::cat(self.entries.values().map(|e| e.grad.clone()).collect(), 0);
        let summed = summed(group, flat)?;
        let mut at = 0;
        for e in self.entries.values_mut() {
            let [len] = e.grad.dims();
            e.grad = summed.clone().slice(at..at + len);
            at += len;
        }
        Ok(())
    }

    pub fn scale(&mut self, factor: f64) {
        self.factor *= factor;
    }

    /// The global L2 norm over all gradients, a `[1]` tensor on the device (nothing is read). On
    /// CPU devices per tensor; on others over one concatenated buffer (three kernels instead
    /// of two per parameter).
    pub fn global_norm(&self) -> Option<Tensor<1>> {
        let first = &self.entries.values().next()?.grad;
        let grads = self.entries.values().map(|e| e.grad.clone());
        let total = if crate::kernels::on_host(&first.device()) {
            Tensor::cat(grads.map(|g| g.square().sum()).collect(), 0).sum()
        } else {
            Tensor::cat(grads.collect(), 0).square().sum()
        };
        let norm = total.sqrt().mul_scalar(self.factor.abs());
        Some(match &self.clip {
            Some(c) => norm * c.clone(),
            None => norm,
        })
    }

    /// Clips to `max_norm` like torch's `clip_grad_norm_`, on the device: the coefficient
    /// `min(1, max_norm / (norm + 1e-6))` multiplies the gradients in the update. Returns the
    /// norm before clipping (`[1]` on the device; 0 without gradients).
    pub fn clip_global_norm(&mut self, max_norm: f64) -> Option<Tensor<1>> {
        let norm = self.global_norm()?;
        if max_norm > 0.0 {
            let coef = norm
                .clone()
                .add_scalar(1e-6)
                .recip()
                .mul_scalar(max_norm)
                .clamp_max(1.0);
            self.clip = Some(match self.clip.take() {
                Some(c) => c * coef,
                None => coef,
            });
        }
        Some(norm)
    }

    /// One gradient in transformers' layout (Linear weights as [out, in]).
    pub fn host(&self, name: &str) -> Option<HostTensor> {
        let e = self.entries.get(name)?;
        let scaled = self.clipped(e.grad.clone().mul_scalar(self.factor));
        let t = HostTensor {
            shape: e.dims.clone(),
            values: HostTensor::from_tensor(scaled).values,
        };
        Some(if e.kind == Some(Matrix::Linear) {
            t.transposed()
        } else {
            t
        })
    }
}

/// `flat` summed over the processes of `group`: a LibTorch tensor where it is, in place (NCCL
/// on GPUs); others through one host buffer, read once and put back once.
pub(crate) fn summed(group: &crate::dist::Group, flat: Tensor<1>) -> crate::Result<Tensor<1>> {
    #[cfg(feature = "tch")]
    if let Some(t) = crate::kernels::tch_tensor(&flat) {
        group.sum_tensor(&t)?;
        return Ok(flat);
    }
    let device = flat.device();
    let mut host = HostTensor::from_tensor(flat).values;
    group.sum_f32(&mut host)?;
    let n = host.len();
    Ok(Tensor::from_data(
        burn::tensor::TensorData::new(host, [n]),
        &device,
    ))
}
