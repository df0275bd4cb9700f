//! safetensors files ↔ model parameters, by transformers name (see [`crate::model::params`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use burn::module::Param;
use burn::prelude::*;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::model::params::{Matrix, ParamWalker, replace};
use crate::{Error, Result};

/// A float tensor read from or to be written to a safetensors file (row-major f32).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub shape: Vec<usize>,
    pub values: Vec<f32>,
}

impl HostTensor {
    pub fn from_tensor<const D: usize>(t: Tensor<D>) -> Self {
        let shape = t.dims().to_vec();
        crate::kernels::count_read();
        let values = t
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .expect("f32 data");
        Self { shape, values }
    }

    pub fn to_tensor<const D: usize>(&self, device: &Device) -> Tensor<D> {
        Tensor::from_data(
            TensorData::new(self.values.clone(), self.shape.clone()),
            device,
        )
    }

    pub fn transposed(&self) -> Self {
        let (r, c) = (self.shape[0], self.shape[1]);
        let mut values = vec![0.0; r * c];
        for i in 0..r {
            for j in 0..c {
                values[j * r + i] = self.values[i * c + j];
            }
        }
        Self {
            shape: vec![c, r],
            values,
        }
    }
}

/// Named tensors from one or more files; `source` says where they came from (for errors).
#[derive(Clone, Debug, Default)]
pub struct TensorMap {
    pub tensors: BTreeMap<String, HostTensor>,
    pub source: PathBuf,
}

/// Integer tensors (ids, masks) are kept apart from the float ones.
///
/// The file's header is checked against its length before anything is read
/// ([`crate::io::tensor_file`]), the values it declares against the memory available
/// ([`crate::memory::check`]), and the tensors are read from a memory map.
pub fn read_safetensors(path: &Path) -> Result<TensorMap> {
    let map = crate::io::tensor_file::open(path)?;
    let st = SafeTensors::deserialize(&map).map_err(|e| {
        Error::Checkpoint(format!(
            "{}: not a valid safetensors file ({e})",
            path.display()
        ))
    })?;
    let views = st.tensors();
    let values: usize = views
        .iter()
        .map(|(_, v)| v.shape().iter().product::<usize>())
        .sum();
    crate::memory::check(
        values as f64 * 4.0,
        &format!("{}: its {values} tensor values read as f32", path.display()),
        "free memory, or give a smaller model",
    )?;
    let mut tensors = BTreeMap::new();
    for (name, view) in views {
        let values = to_f32(&view).ok_or_else(|| {
            Error::Checkpoint(format!(
                "{}: tensor `{name}` has unsupported dtype {:?}",
                path.display(),
                view.dtype()
            ))
        })?;
        tensors.insert(
            name,
            HostTensor {
                shape: view.shape().to_vec(),
                values,
            },
        );
    }
    if let Some(name) = non_finite(&tensors) {
        return Err(Error::Checkpoint(format!(
            "{}: tensor `{name}` holds a non-finite value (NaN or infinity)",
            path.display()
        )));
    }
    Ok(TensorMap {
        tensors,
        source: path.to_path_buf(),
    })
}

/// The first tensor holding a NaN or an infinity: such a tensor is never written as a model
/// nor loaded as one.
fn non_finite(tensors: &BTreeMap<String, HostTensor>) -> Option<&str> {
    tensors
        .iter()
        .find(|(_, t)| t.values.iter().any(|v| !v.is_finite()))
        .map(|(k, _)| k.as_str())
}

fn to_f32(view: &TensorView<'_>) -> Option<Vec<f32>> {
    let d = view.data();
    Some(match view.dtype() {
        Dtype::F32 => d
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect(),
        Dtype::F64 => d
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()) as f32)
            .collect(),
        Dtype::F16 => d
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::BF16 => d
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::I64 => d
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f32)
            .collect(),
        _ => return None,
    })
}

/// Writes f32 tensors atomically (temp file + rename), with optional string metadata.
pub fn write_safetensors(
    path: &Path,
    tensors: &BTreeMap<String, HostTensor>,
    metadata: Option<std::collections::HashMap<String, String>>,
) -> Result<()> {
    if let Some(name) = non_finite(tensors) {
        return Err(Error::Diverged(format!(
            "{}: tensor `{name}` holds a non-finite value (NaN or infinity); not written",
            path.display()
        )));
    }
    let bytes: Vec<(String, Vec<u8>, Vec<usize>)> = tensors
        .iter()
        .map(|(k, t)| {
            (
                k.clone(),
                t.values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                t.shape.clone(),
            )
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(k, b, s)| {
            (
                k.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).expect("consistent view"),
            )
        })
        .collect();
    let data = safetensors::serialize(views, metadata)
        .map_err(|e| Error::Checkpoint(format!("{}: {e}", path.display())))?;
    crate::io::write_atomic(path, &crate::io::tensor_file::finish_for_writing(data))
}

/// Sets every parameter a model walks from a [`TensorMap`]; collects the first error.
pub struct Loader<'a> {
    map: &'a TensorMap,
    device: Device,
    /// Prefix prepended to each walked name before the lookup (e.g. `generator.` stripped).
    rename: Box<dyn Fn(&str) -> String + 'a>,
    used: BTreeSet<String>,
    error: Option<Error>,
}

impl<'a> Loader<'a> {
    pub fn new(map: &'a TensorMap, device: &Device) -> Self {
        Self {
            map,
            device: device.clone(),
            rename: Box::new(|n| n.to_string()),
            used: BTreeSet::new(),
            error: None,
        }
    }

    /// Looks each walked name up as `rename(name)` instead.
    pub fn with_rename(mut self, f: impl Fn(&str) -> String + 'a) -> Self {
        self.rename = Box::new(f);
        self
    }

    /// The first error met, if any; else the names that were used.
    pub fn finish(self) -> Result<BTreeSet<String>> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.used),
        }
    }

    fn fetch(
        &mut self,
        name: &str,
        expected: &[usize],
        kind: Option<Matrix>,
    ) -> Option<HostTensor> {
        if self.error.is_some() {
            return None;
        }
        let key = (self.rename)(name);
        let src = self.map.source.display();
        let Some(t) = self.map.tensors.get(&key) else {
            self.error = Some(Error::Checkpoint(format!("{src}: missing tensor `{key}`")));
            return None;
        };
        let t = if kind == Some(Matrix::Linear) && t.shape.len() == 2 {
            t.transposed()
        } else {
            t.clone()
        };
        if t.shape != expected {
            let file_shape = if kind == Some(Matrix::Linear) {
                vec![expected[1], expected[0]]
            } else {
                expected.to_vec()
            };
            let got = self.map.tensors[&key].shape.clone();
            self.error = Some(Error::Checkpoint(format!(
                "{src}: tensor `{key}` has shape {got:?}, the model expects {file_shape:?}"
            )));
            return None;
        }
        self.used.insert(key);
        Some(t)
    }
}

impl ParamWalker for Loader<'_> {
    fn matrix(&mut self, name: &str, kind: Matrix, param: &mut Param<Tensor<2>>) {
        let dims = param.val().dims();
        if let Some(t) = self.fetch(name, &dims, Some(kind)) {
            replace(param, t.to_tensor(&self.device));
        }
    }
    fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>) {
        let dims = param.val().dims();
        if let Some(t) = self.fetch(name, &dims, None) {
            replace(param, t.to_tensor(&self.device));
        }
    }
}

/// Reads every parameter a model walks into host tensors, in transformers' layout.
#[derive(Default)]
pub struct Exporter {
    pub tensors: BTreeMap<String, HostTensor>,
}

impl ParamWalker for Exporter {
    fn matrix(&mut self, name: &str, kind: Matrix, param: &mut Param<Tensor<2>>) {
        let t = HostTensor::from_tensor(param.val());
        let t = if kind == Matrix::Linear {
            t.transposed()
        } else {
            t
        };
        self.tensors.insert(name.to_string(), t);
    }
    fn vector(&mut self, name: &str, param: &mut Param<Tensor<1>>) {
        self.tensors
            .insert(name.to_string(), HostTensor::from_tensor(param.val()));
    }
}
