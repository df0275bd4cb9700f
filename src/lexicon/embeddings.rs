//! Embedding neighbours: the top-k cosine neighbours of each whole-word vocabulary token, from a
//! word2vec (text or binary) or GloVe file, or from a model's own token-embedding matrix.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use burn::prelude::*;

use crate::{Error, Result};

/// Word vectors: `words[i]` has row i of `values` (`dim` floats each).
pub struct WordVectors {
    pub words: Vec<String>,
    pub dim: usize,
    pub values: Vec<f32>,
}

/// Reads word2vec text (`N D` header), GloVe text (no header) or word2vec binary (`N D` header
/// then `word␠` + D little-endian f32 per entry). Only words in `keep` are stored (lower case).
pub fn read_vectors(path: &Path, keep: &dyn Fn(&str) -> bool) -> Result<WordVectors> {
    let f = crate::io::read::open(path)?;
    let mut r = BufReader::new(f);
    let mut first = Vec::new();
    r.read_until(b'\n', &mut first)
        .map_err(|e| Error::io(path, e))?;
    let head = String::from_utf8_lossy(&first).trim().to_string();
    let fields: Vec<&str> = head.split_whitespace().collect();
    let header = fields.len() == 2 && fields.iter().all(|f| f.parse::<usize>().is_ok());
    let mut out = WordVectors {
        words: Vec::new(),
        dim: 0,
        values: Vec::new(),
    };
    let bad = |line: usize, why: &str| Error::Input(format!("{}:{line}: {why}", path.display()));
    if header {
        let (n, dim) = (
            fields[0].parse::<usize>().unwrap(),
            fields[1].parse::<usize>().unwrap(),
        );
        if dim == 0 {
            return Err(bad(1, "dimension line says 0 dimensions"));
        }
        out.dim = dim;
        // Text when the rest is valid UTF-8 (packed little-endian floats practically never are).
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).map_err(|e| Error::io(path, e))?;
        let text = std::str::from_utf8(&rest).ok();
        match text {
            Some(t) => parse_text(t, 2, dim, keep, &mut out, &bad)?,
            None => {
                let mut at = 0;
                for i in 0..n {
                    let sp = rest[at..]
                        .iter()
                        .position(|&b| b == b' ')
                        .ok_or_else(|| bad(i + 2, "truncated binary entry"))?;
                    let word = String::from_utf8_lossy(&rest[at..at + sp])
                        .trim()
                        .to_lowercase();
                    at += sp + 1;
                    let end = at + 4 * dim;
                    if end > rest.len() {
                        return Err(bad(i + 2, "truncated binary vector"));
                    }
                    if keep(&word) {
                        out.words.push(word);
                        out.values.extend(
                            rest[at..end]
                                .chunks_exact(4)
                                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                        );
                    }
                    at = end;
                    if rest.get(at) == Some(&b'\n') {
                        at += 1;
                    }
                }
            }
        }
    } else {
        // GloVe: the first line is already a vector.
        out.dim = fields.len().saturating_sub(1);
        if out.dim == 0 {
            return Err(bad(1, "expected `N D` or `word v1 v2 …`"));
        }
        let mut rest = String::new();
        r.read_to_string(&mut rest)
            .map_err(|e| Error::io(path, e))?;
        let all = format!("{head}\n{rest}");
        parse_text(&all, 1, out.dim, keep, &mut out, &bad)?;
    }
    Ok(out)
}

fn parse_text(
    text: &str,
    first_line: usize,
    dim: usize,
    keep: &dyn Fn(&str) -> bool,
    out: &mut WordVectors,
    bad: &dyn Fn(usize, &str) -> Error,
) -> Result<()> {
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let n = first_line + i;
        let mut it = line.split_whitespace();
        let word = it.next().unwrap_or("").to_lowercase();
        let vals: Vec<&str> = it.collect();
        if vals.len() != dim {
            return Err(bad(
                n,
                &format!("{} values, the dimension is {dim}", vals.len()),
            ));
        }
        let parsed: std::result::Result<Vec<f32>, _> =
            vals.iter().map(|v| v.parse::<f32>()).collect();
        let v = parsed.map_err(|_| bad(n, "non-numeric value"))?;
        if keep(&word) {
            out.words.push(word);
            out.values.extend(v);
        }
    }
    Ok(())
}

/// For each row of `vectors`, the indices of its `k` most cosine-similar other rows.
pub fn top_k_neighbours(vectors: &WordVectors, k: usize, device: &Device) -> Vec<Vec<usize>> {
    let n = vectors.words.len();
    if n < 2 || k == 0 {
        return vec![Vec::new(); n];
    }
    let m: Tensor<2> = Tensor::from_data(
        TensorData::new(vectors.values.clone(), [n, vectors.dim]),
        device,
    );
    let norms = m.clone().square().sum_dim(1).sqrt().clamp_min(1e-12);
    let m = m / norms;
    let mt = m.clone().transpose();
    let kk = (k + 1).min(n);
    let mut out = Vec::with_capacity(n);
    let block = 1024;
    for start in (0..n).step_by(block) {
        let end = (start + block).min(n);
        let sims = m
            .clone()
            .slice([start..end, 0..vectors.dim])
            .matmul(mt.clone());
        let (_, idx) = sims.topk_with_indices(kk, 1);
        let idx: Vec<i64> = idx
            .into_data()
            .convert::<i64>()
            .try_into_vec::<i64>()
            .expect("indices");
        for (r, row) in idx.chunks(kk).enumerate() {
            let me = start + r;
            out.push(
                row.iter()
                    .map(|&j| j as usize)
                    .filter(|&j| j != me)
                    .take(k)
                    .collect(),
            );
        }
    }
    out
}

/// Neighbour pairs (word, word) for the table builder.
pub fn neighbour_map(
    vectors: &WordVectors,
    k: usize,
    device: &Device,
) -> HashMap<String, Vec<String>> {
    let nb = top_k_neighbours(vectors, k, device);
    vectors
        .words
        .iter()
        .zip(nb)
        .map(|(w, list)| {
            (
                w.clone(),
                list.into_iter().map(|j| vectors.words[j].clone()).collect(),
            )
        })
        .collect()
}
