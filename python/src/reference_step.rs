//! trueneg's own masked-LM step on a transformers `BertForMaskedLM` folder and one batch, for
//! checking the Python path against it: the crate's BERT (loaded from the folder as `finetune`
//! and the golden tests load it), its MLM logits at the masked positions in eval mode (no
//! dropout), the argmax prediction, Hard Correction's decision as the step makes it on its
//! device (`synonyms_on_device` over the padded table; the Python path uses the host rule,
//! `correction_weights`, so the two implementations are checked against each other), the
//! weighted masked-LM loss and word-level Soft Regularization: the functions the pre-training
//! step calls.

use burn::prelude::*;
use numpy::{IntoPyArray, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

use trueneg::interop::read_hf_config;
use trueneg::interop::tensors::{Loader, read_safetensors};
use trueneg::model::{BertMlm, Inputs};
use trueneg::objective::hard_correction::{CorrectionCounts, synonyms_on_device};
use trueneg::objective::masked_cross_entropy;
use trueneg::objective::soft_regularization::cosine_distances;
use trueneg::text::shared_table::padded_table;

use crate::errors::{bad_argument, to_py};
use crate::objectives::{counts_dict, scalar};
use crate::table::SynonymTable;

/// The label of positions outside the loss, as transformers writes it.
const IGNORE: i64 = -100;

fn load(model_dir: &std::path::Path, device: &Device) -> PyResult<BertMlm> {
    let cfg = read_hf_config(&model_dir.join("config.json")).map_err(to_py)?;
    let mut model = BertMlm::new(&cfg.encoder.without_dropout(), device);
    let weights = read_safetensors(&model_dir.join("model.safetensors")).map_err(to_py)?;
    let mut loader = Loader::new(&weights, device);
    model.walk(&mut loader);
    loader.finish().map_err(to_py)?;
    Ok(model)
}

/// An integer array of `batch` (`input_ids` sets the shape; the others must have it), or
/// `fill` everywhere when an optional key is absent.
fn column(
    batch: &Bound<'_, PyDict>,
    key: &str,
    shape: Option<[usize; 2]>,
    fill: Option<i64>,
    device: &Device,
) -> PyResult<(Vec<i64>, [usize; 2], Tensor<2, Int>)> {
    let named = format!("batch[{key:?}]");
    let (values, found) = match (batch.get_item(key)?, shape, fill) {
        (Some(a), _, _) => {
            let a: PyReadonlyArray2<'_, i64> = a.extract().map_err(|_| {
                bad_argument(&named, "expected an int64 array of shape [batch, len]")
            })?;
            let s = [a.shape()[0], a.shape()[1]];
            (a.as_array().iter().copied().collect::<Vec<i64>>(), s)
        }
        (None, Some(s), Some(v)) => (vec![v; s[0] * s[1]], s),
        (None, _, _) => return Err(bad_argument(&named, "missing")),
    };
    if let Some(s) = shape.filter(|&s| s != found) {
        return Err(bad_argument(
            &named,
            format!("shape {found:?}, expected input_ids' {s:?}"),
        ));
    }
    let t = Tensor::from_data(TensorData::new(values.clone(), found), device);
    Ok((values, found, t))
}

/// The step on one batch: a dict of int64 `[batch, len]` arrays as a transformers data collator
/// makes them (`input_ids`, `labels` −100 outside the masked positions, and optionally
/// `attention_mask` and `token_type_ids`). With `table`, Hard Correction's weights drop the
/// corrected positions; with `sr_weight` > 0, word-level SR is added (`sr_reduction` `mean`
/// over the masked positions, or `sum` per sequence averaged over the batch). Returns
/// `dropped` (bool `[batch, len]`), `predictions` (the argmax, −100 outside the masked
/// positions), `mlm_loss`, `sr_loss`, `loss` and HC's counts.
#[pyfunction]
#[pyo3(signature = (model_dir, batch, table = None, sr_weight = 0.0, sr_reduction = "mean"))]
pub fn bert_mlm_step<'py>(
    py: Python<'py>,
    model_dir: PathBuf,
    batch: &Bound<'py, PyDict>,
    table: Option<&SynonymTable>,
    sr_weight: f64,
    sr_reduction: &str,
) -> PyResult<Bound<'py, PyDict>> {
    if !matches!(sr_reduction, "mean" | "sum") {
        return Err(bad_argument(
            "sr_reduction",
            format!("{sr_reduction:?}, expected \"mean\" or \"sum\""),
        ));
    }
    let device = trueneg::device::host();
    let model = load(&model_dir, &device)?;
    let (_, shape, ids) = column(batch, "input_ids", None, None, &device)?;
    let [rows_in_batch, len] = shape;
    let (_, _, attention_mask) = column(batch, "attention_mask", Some(shape), Some(1), &device)?;
    let (_, _, token_types) = column(batch, "token_type_ids", Some(shape), Some(0), &device)?;
    let (flat, _, _) = column(batch, "labels", Some(shape), None, &device)?;
    let x = Inputs {
        ids,
        token_types,
        attention_mask: Some(attention_mask),
    };
    let batch = rows_in_batch;
    let positions: Vec<usize> = (0..flat.len()).filter(|&i| flat[i] != IGNORE).collect();
    let gold: Vec<u32> = positions.iter().map(|&i| flat[i] as u32).collect();
    let n = positions.len();
    let as_tensor = |v: Vec<i64>| Tensor::<1, Int>::from_data(TensorData::new(v, [n]), &device);
    let pos = as_tensor(positions.iter().map(|&i| i as i64).collect());
    let gold_ids = as_tensor(gold.iter().map(|&g| i64::from(g)).collect());
    let logits = model.mlm_logits(&x, pos);
    let pred = logits.clone().argmax(1).reshape([n]);
    let predicted: Vec<u32> = pred
        .clone()
        .into_data()
        .convert::<i64>()
        .try_to_vec::<i64>()
        .expect("ids")
        .into_iter()
        .map(|p| p as u32)
        .collect();
    let mut counts = None;
    let weights: Option<Vec<f32>> = match table {
        Some(t) => {
            let vocab = model.embeddings.word_matrix().dims()[0];
            let corrected = synonyms_on_device(
                padded_table(&t.inner, vocab, &device),
                gold_ids.clone(),
                pred.clone(),
            );
            let corrected: Vec<bool> = corrected
                .into_data()
                .convert::<bool>()
                .try_to_vec::<bool>()
                .expect("bools");
            let mismatched = (0..n).filter(|&k| predicted[k] != gold[k]).count();
            let mut rows_hit: Vec<usize> = (0..n)
                .filter(|&k| corrected[k])
                .map(|k| positions[k] / len)
                .collect();
            rows_hit.dedup();
            counts = Some(CorrectionCounts {
                masked: n,
                mismatched,
                corrected: corrected.iter().filter(|&&c| c).count(),
                sequences: batch,
                sequences_corrected: rows_hit.len(),
            });
            Some(
                corrected
                    .iter()
                    .map(|&c| if c { 0.0 } else { 1.0 })
                    .collect(),
            )
        }
        None => None,
    };
    let mut dropped = vec![false; batch * len];
    let mut predictions = vec![IGNORE; batch * len];
    for (k, &i) in positions.iter().enumerate() {
        predictions[i] = i64::from(predicted[k]);
        dropped[i] = weights.as_ref().is_some_and(|w| w[k] == 0.0);
    }
    let w = weights.map(|w| Tensor::<1>::from_data(TensorData::new(w, [n]), &device));
    let mlm = scalar(masked_cross_entropy(logits, gold_ids.clone(), w));
    let sr = if sr_weight > 0.0 {
        let d = cosine_distances(model.embeddings.word_matrix(), pred, gold_ids);
        match sr_reduction {
            "sum" => scalar(d.sum()) / batch.max(1) as f64,
            _ => scalar(d.mean()),
        }
    } else {
        0.0
    };
    let out = PyDict::new(py);
    let grid = |v: Vec<i64>| v.into_pyarray(py).reshape(shape);
    out.set_item("dropped", dropped.into_pyarray(py).reshape(shape)?)?;
    out.set_item("predictions", grid(predictions)?)?;
    out.set_item("mlm_loss", mlm)?;
    out.set_item("sr_loss", sr)?;
    out.set_item("loss", mlm + sr_weight * sr)?;
    let counts = match counts {
        Some(c) => counts_dict(py, &c)?,
        None => PyDict::new(py),
    };
    out.set_item("counts", counts)?;
    Ok(out)
}
