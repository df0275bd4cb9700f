//! The objectives' rules on numpy arrays: Hard Correction's weights and counts
//! (`objective::hard_correction::correction_weights`), Soft Regularization's distances with
//! their gradients (`objective::soft_regularization::cosine_distances`, differentiated by burn's
//! autodiff), the masked-LM loss (`objective::masked_cross_entropy`) and the sampled
//! prediction (`kernels::sampling::sample_rows`).

use burn::prelude::*;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use trueneg::objective::hard_correction::{
    CorrectionCounts, correction_weights as rust_correction_weights,
};
use trueneg::objective::soft_regularization::cosine_distances as rust_cosine_distances;

use crate::arrays::matrix;
use crate::errors::bad_argument;
use crate::table::SynonymTable;

/// Non-negative ids as `u32` (the argument's name in the error line).
fn ids(name: &str, values: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<u32>> {
    values
        .as_array()
        .iter()
        .map(|&v| {
            u32::try_from(v).map_err(|_| bad_argument(name, format!("{v} is not a token id")))
        })
        .collect()
}

fn same_length(name: &str, n: usize, expected: usize) -> PyResult<()> {
    if n == expected {
        Ok(())
    } else {
        Err(bad_argument(
            name,
            format!("{n} values, expected {expected} (one per masked position)"),
        ))
    }
}

/// Hard Correction at the masked positions: `predicted`, `gold` and `rows` (each position's
/// sequence in the batch) `[n]`, `batch` sequences. Returns the weights `I_k` `[n]` (0 where
/// the prediction differs from the gold token and is its synonym) and the counts (`masked`,
/// `mismatched`, `corrected`, `sequences`, `sequences_corrected`).
#[pyfunction]
pub fn correction_weights<'py>(
    py: Python<'py>,
    predicted: PyReadonlyArray1<'py, i64>,
    gold: PyReadonlyArray1<'py, i64>,
    rows: PyReadonlyArray1<'py, i64>,
    batch: usize,
    table: &SynonymTable,
) -> PyResult<(Bound<'py, PyArray1<f32>>, Bound<'py, PyDict>)> {
    let (predicted, gold) = (ids("predicted", &predicted)?, ids("gold", &gold)?);
    same_length("predicted", predicted.len(), gold.len())?;
    let rows: Vec<usize> = rows
        .as_array()
        .iter()
        .map(|&r| {
            usize::try_from(r)
                .ok()
                .filter(|&r| r < batch)
                .ok_or_else(|| bad_argument("rows", format!("{r} is not a row of {batch}")))
        })
        .collect::<PyResult<_>>()?;
    same_length("rows", rows.len(), gold.len())?;
    let (weights, c) = rust_correction_weights(&predicted, &gold, &rows, batch, &table.inner);
    Ok((weights.into_pyarray(py), counts_dict(py, &c)?))
}

/// Hard Correction's counts as the dict Python reads (`masked`, `mismatched`, `corrected`,
/// `sequences`, `sequences_corrected`).
pub(crate) fn counts_dict<'py>(
    py: Python<'py>,
    c: &CorrectionCounts,
) -> PyResult<Bound<'py, PyDict>> {
    let counts = PyDict::new(py);
    counts.set_item("masked", c.masked)?;
    counts.set_item("mismatched", c.mismatched)?;
    counts.set_item("corrected", c.corrected)?;
    counts.set_item("sequences", c.sequences)?;
    counts.set_item("sequences_corrected", c.sequences_corrected)?;
    Ok(counts)
}

/// `1 − cos(pred_k, gold_k)` for each row k of `pred` and `gold` `[n, dim]`, and the gradient
/// of their sum with respect to each (row k of each gradient is `∂d_k/∂row_k`).
#[pyfunction]
#[allow(clippy::type_complexity)] // the three arrays Python unpacks
pub fn cosine_distances<'py>(
    py: Python<'py>,
    pred: PyReadonlyArray2<'py, f32>,
    gold: PyReadonlyArray2<'py, f32>,
) -> PyResult<(
    Bound<'py, PyArray1<f32>>,
    Bound<'py, PyArray2<f32>>,
    Bound<'py, PyArray2<f32>>,
)> {
    let (mut values, [n, dim]) = matrix("pred_embeddings", &pred)?;
    let (gold, gold_shape) = matrix("gold_embeddings", &gold)?;
    if gold_shape != [n, dim] {
        return Err(bad_argument(
            "gold_embeddings",
            format!("shape {gold_shape:?}, expected pred_embeddings' [{n}, {dim}]"),
        ));
    }
    if n == 0 {
        let empty = || {
            PyArray1::from_slice(py, &[])
                .reshape([0, dim])
                .expect("no values")
        };
        return Ok((Vec::<f32>::new().into_pyarray(py), empty(), empty()));
    }
    values.extend(gold);
    let device = trueneg::device::host().autodiff();
    let both =
        Tensor::<2>::from_data(TensorData::new(values, [2 * n, dim]), &device).require_grad();
    let index = |from: usize| {
        let v: Vec<i64> = (from..from + n).map(|i| i as i64).collect();
        Tensor::<1, Int>::from_data(TensorData::new(v, [n]), &device)
    };
    let d = rust_cosine_distances(both.clone(), index(0), index(n));
    let grads = d.clone().sum().backward();
    let g: Vec<f32> = both
        .grad(&grads)
        .map(|g| {
            g.into_data()
                .convert::<f32>()
                .try_to_vec::<f32>()
                .expect("f32")
        })
        .unwrap_or_else(|| vec![0.0; 2 * n * dim]);
    let d: Vec<f32> = d
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .expect("f32");
    let (gp, gg) = g.split_at(n * dim);
    let as_matrix = |v: &[f32]| {
        PyArray1::from_slice(py, v)
            .reshape([n, dim])
            .expect("n · dim values")
    };
    Ok((d.into_pyarray(py), as_matrix(gp), as_matrix(gg)))
}

/// The masked-LM loss of `logits` `[n, vocab]` at gold `labels` `[n]`: the mean cross-entropy
/// (NaN for no rows, as any mean of nothing), or with `weights` `[n]` (Hard Correction's `I_k`)
/// `Σ I_k · nll_k / max(Σ I_k, 1)` (0 for no rows).
#[pyfunction]
#[pyo3(signature = (logits, labels, weights = None))]
pub fn masked_lm_loss(
    logits: PyReadonlyArray2<'_, f32>,
    labels: PyReadonlyArray1<'_, i64>,
    weights: Option<PyReadonlyArray1<'_, f32>>,
) -> PyResult<f64> {
    let (values, [n, vocab]) = matrix("logits", &logits)?;
    let labels = ids("labels", &labels)?;
    same_length("labels", labels.len(), n)?;
    if let Some(&bad) = labels.iter().find(|&&l| l as usize >= vocab) {
        return Err(bad_argument(
            "labels",
            format!("{bad} is outside the {vocab} logits"),
        ));
    }
    if n == 0 {
        // No masked position: the mean of nothing, or a weighted sum over at least 1.
        return Ok(if weights.is_some() { 0.0 } else { f64::NAN });
    }
    let device = trueneg::device::host();
    let logits = Tensor::<2>::from_data(TensorData::new(values, [n, vocab]), &device);
    let labels: Vec<i64> = labels.into_iter().map(i64::from).collect();
    let labels = Tensor::<1, Int>::from_data(TensorData::new(labels, [n]), &device);
    let weights = match weights {
        Some(w) => {
            let w: Vec<f32> = w.as_array().iter().copied().collect();
            same_length("weights", w.len(), n)?;
            Some(Tensor::<1>::from_data(TensorData::new(w, [n]), &device))
        }
        None => None,
    };
    let loss = trueneg::objective::masked_cross_entropy(logits, labels, weights);
    Ok(scalar(loss))
}

/// One draw per row of `logits` `[rows, vocab]` from its softmax at temperature 1, row r from
/// stream r of a ChaCha8 generator seeded with `seed` (the generator's sampler).
#[pyfunction]
pub fn sample_rows<'py>(
    py: Python<'py>,
    logits: PyReadonlyArray2<'py, f32>,
    seed: u64,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let (values, [_, vocab]) = matrix("logits", &logits)?;
    let drawn = trueneg::kernels::sampling::sample_rows(&values, vocab, seed);
    Ok(drawn
        .into_iter()
        .map(i64::from)
        .collect::<Vec<_>>()
        .into_pyarray(py))
}

/// The value of a `[1]` tensor.
pub(crate) fn scalar(t: Tensor<1>) -> f64 {
    let v = t.into_data().convert::<f64>().try_to_vec::<f64>();
    v.expect("an f64 value")[0]
}
