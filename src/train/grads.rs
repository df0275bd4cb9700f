//! A step's gradients, flattened by parameter name: collected from burn's autodiff, summed
//! over micro-batches and replicas, scaled and clipped by their global norm.

use std::collections::BTreeMap;

use burn::module::Param;
use burn::prelude::*;
use burn::tensor::Gradients;

use crate::interop::tensors::HostTensor;
use crate::model::params::{Matrix, ParamWalker};

/// Flattened gradients by parameter name (no autodiff), ready for clipping and the update.
/// The true gradient of `name` is `factor · entries[name]`: scaling (clipping, averaging over
/// micro-batches) only changes `factor`, which the update folds into its own constants.
#[derive(Clone)]
pub struct Grads {
    pub entries: BTreeMap<String, (Tensor<1>, Vec<usize>, Option<Matrix>)>,
    pub factor: f64,
}

impl Default for Grads {
    fn default() -> Self {
        Self {
            entries: BTreeMap::new(),
            factor: 1.0,
        }
    }
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

    /// Multiplies every entry by `factor` (and resets it to 1).
    fn materialise(&mut self) {
        if self.factor != 1.0 {
            for e in self.entries.values_mut() {
                e.0 = e.0.clone().mul_scalar(self.factor);
            }
            self.factor = 1.0;
        }
    }

    /// The same gradients on `device` (a replica's).
    pub fn to_device(&self, device: &Device) -> Self {
        Self {
            entries: self
                .entries
                .iter()
                .map(|(k, (g, dims, kind))| {
                    (
                        k.clone(),
                        (g.clone().to_device(device), dims.clone(), *kind),
                    )
                })
                .collect(),
            factor: self.factor,
        }
    }

    /// Adds another set of gradients (gradient accumulation).
    pub fn accumulate(&mut self, mut other: Grads) {
        if self.factor != other.factor {
            self.materialise();
            other.materialise();
        }
        for (k, (g, dims, kind)) in other.entries {
            match self.entries.get_mut(&k) {
                Some(e) => e.0 = e.0.clone() + g,
                None => {
                    self.entries.insert(k, (g, dims, kind));
                }
            }
        }
    }

    /// Sums the gradients over the processes of `group`, in place: one flat buffer in
    /// parameter-name order, read from the device once, all-reduced in buckets
    /// ([`crate::dist::BUCKET`]) and put back once.
    pub fn all_reduce(&mut self, group: &crate::dist::Group) -> crate::Result<()> {
        self.materialise();
        let Some((first, _, _)) = self.entries.values().next() else {
            return Ok(());
        };
        let device = first.device();
        let flat = Tensor::cat(
            self.entries.values().map(|(g, _, _)| g.clone()).collect(),
            0,
        );
        let mut host = HostTensor::from_tensor(flat).values;
        group.sum_f32(&mut host)?;
        let n = host.len();
        let summed: Tensor<1> =
            Tensor::from_data(burn::tensor::TensorData::new(host, [n]), &device);
        let mut at = 0;
        for (g, _, _) in self.entries.values_mut() {
            let [len] = g.dims();
            *g = summed.clone().slice(at..at + len);
            at += len;
        }
        Ok(())
    }

    pub fn scale(&mut self, factor: f64) {
        self.factor *= factor;
    }

    /// The global L2 norm over all gradients (one host sync). On CPU devices per tensor; on
    /// others over one concatenated buffer (three kernels instead of two per parameter).
    pub fn global_norm(&self) -> f64 {
        let Some((first, _, _)) = self.entries.values().next() else {
            return 0.0;
        };
        let grads = self.entries.values().map(|(g, _, _)| g.clone());
        let total = if crate::kernels::on_host(&first.device()) {
            Tensor::cat(grads.map(|g| g.square().sum()).collect(), 0).sum()
        } else {
            Tensor::cat(grads.collect(), 0).square().sum()
        };
        (total.into_scalar::<f32>() as f64).sqrt() * self.factor.abs()
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
            values: HostTensor::from_tensor(g.clone().mul_scalar(self.factor)).values,
        };
        Some(if *kind == Some(Matrix::Linear) {
            t.transposed()
        } else {
            t
        })
    }
}
