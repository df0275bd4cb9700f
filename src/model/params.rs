//! Named traversal of a model's parameters, with transformers' parameter names.
//!
//! Every model implements `walk(&mut self, .., &mut dyn ParamWalker)` and hands each parameter
//! to the walker under its transformers name (`bert.encoder.layer.0.attention.self.query.weight`).
//! Loading and exporting safetensors, the optimizer step, gradient norms and checkpoints are all
//! walkers, so the name table lives in one place.

use burn::module::{Param, ParamId};
use burn::nn::{LayerNorm, Linear};
use burn::prelude::*;

/// How a 2-D parameter is stored in transformers' files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matrix {
    /// An `nn.Linear` weight: transformers stores [out, in], burn keeps [in, out].
    Linear,
    /// An embedding table [rows, dim], stored as is.
    Table,
}

/// A visitor over named parameters that may replace them.
pub trait ParamWalker {
    fn matrix(&mut self, name: &str, kind: Matrix, param: &mut Param<Tensor<2>>);
    fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>);

    fn table(&mut self, name: &str, param: &mut Param<Tensor<2>>) {
        self.matrix(name, Matrix::Table, param)
    }
}

pub fn walk_linear(w: &mut dyn ParamWalker, prefix: &str, l: &mut Linear) {
    w.matrix(&format!("{prefix}.weight"), Matrix::Linear, &mut l.weight);
    if let Some(b) = &mut l.bias {
        w.vector(&format!("{prefix}.bias"), b);
    }
}

pub fn walk_layer_norm(w: &mut dyn ParamWalker, prefix: &str, n: &mut LayerNorm) {
    w.vector(&format!("{prefix}.weight"), &mut n.gamma);
    if let Some(b) = &mut n.beta {
        w.vector(&format!("{prefix}.bias"), b);
    }
}

/// Replaces a parameter's value, keeping its id and its autodiff / require-grad state.
pub fn replace<const D: usize>(param: &mut Param<Tensor<D>>, value: Tensor<D>) {
    let (id, old, mapper) = param.clone().consume();
    let value = Tracking::of(&old).apply(value);
    *param = Param::from_mapped_value(id, value, mapper);
}

/// Sets a parameter to `update` of its plain value, which the parameter no longer holds while
/// `update` runs: where nothing else holds it either, its buffer may be written in place (the
/// optimizer's update). Keeps the id and the autodiff / require-grad state, as [`replace`].
pub fn update_value<const D: usize>(
    param: &mut Param<Tensor<D>>,
    update: impl FnOnce(Tensor<D>) -> Tensor<D>,
) {
    let device = param.val().device();
    let empty = Param::initialized(ParamId::new(), Tensor::<D>::empty([0; D], &device));
    let (id, old, mapper) = std::mem::replace(param, empty).consume();
    let tracking = Tracking::of(&old);
    let value = tracking.apply(update(old.inner()));
    *param = Param::from_mapped_value(id, value, mapper);
}

/// How a parameter's value is tracked by autodiff.
#[derive(Clone, Copy)]
struct Tracking {
    autodiff: bool,
    require_grad: bool,
}

impl Tracking {
    fn of<const D: usize>(value: &Tensor<D>) -> Self {
        Tracking {
            autodiff: value.is_autodiff(),
            require_grad: value.is_require_grad(),
        }
    }

    /// `value` tracked this way.
    fn apply<const D: usize>(self, value: Tensor<D>) -> Tensor<D> {
        let mut value = value.inner().autodiff();
        if !self.autodiff {
            value = value.inner();
        }
        if self.require_grad {
            value = value.require_grad();
        }
        value
    }
}

/// Collects every parameter's name and shape (used for listings and shape checks).
#[derive(Default)]
pub struct ShapeLister(pub Vec<(String, Vec<usize>)>);

impl ParamWalker for ShapeLister {
    fn matrix(&mut self, name: &str, _kind: Matrix, param: &mut Param<Tensor<2>>) {
        self.0.push((name.to_string(), param.val().dims().to_vec()));
    }
    fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>) {
        self.0.push((name.to_string(), param.val().dims().to_vec()));
    }
}

/// Every parameter's name and shape as transformers' files hold it (`Linear` weights [out, in]).
#[derive(Default)]
pub struct FileShapes(pub Vec<(String, Vec<usize>)>);

impl ParamWalker for FileShapes {
    fn matrix(&mut self, name: &str, kind: Matrix, param: &mut Param<Tensor<2>>) {
        let mut dims = param.val().dims().to_vec();
        if matches!(kind, Matrix::Linear) {
            dims.reverse();
        }
        self.0.push((name.to_string(), dims));
    }
    fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>) {
        self.0.push((name.to_string(), param.val().dims().to_vec()));
    }
}

/// Gives every parameter a copy on `device`, a new autodiff leaf with the same id and
/// require-grad state: a data-parallel replica, with an autodiff graph of its own.
pub struct MoveTo<'a>(pub &'a Device);

impl ParamWalker for MoveTo<'_> {
    fn matrix(&mut self, _name: &str, _kind: Matrix, param: &mut Param<Tensor<2>>) {
        let value = param.val().to_device(self.0);
        replace(param, value);
    }
    fn vector(&mut self, _name: &str, param: &mut Param<Tensor<1>>) {
        let value = param.val().to_device(self.0);
        replace(param, value);
    }
}
