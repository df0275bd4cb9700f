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
/// The file is streamed an entry at a time (a word2vec file of several GB keeps only the
/// vocabulary's rows); an entry longer than [`MAX_ENTRY`] is an error naming its line.
pub fn read_vectors(path: &Path, keep: &dyn Fn(&str) -> bool) -> Result<WordVectors> {
    let f = crate::io::read::open(path)?;
    let mut r = Entries {
        reader: BufReader::with_capacity(1 << 16, f),
        path,
        line: 0,
    };
    let first = r.line()?.unwrap_or_default();
    let fields: Vec<&str> = first.split_whitespace().collect();
    let header = fields.len() == 2 && fields.iter().all(|f| f.parse::<usize>().is_ok());
    let mut out = WordVectors {
        words: Vec::new(),
        dim: 0,
        values: Vec::new(),
    };
    if !header {
        // GloVe: the first line is already a vector.
        out.dim = fields.len().saturating_sub(1);
        if out.dim == 0 {
            return Err(r.bad(1, "expected `N D` or `word v1 v2 …`"));
        }
        parse_line(&first, 1, keep, &mut out, &r)?;
        return read_text(&mut r, keep, out);
    }
    let (n, dim) = (
        fields[0].parse::<usize>().unwrap(),
        fields[1].parse::<usize>().unwrap(),
    );
    if dim == 0 {
        return Err(r.bad(1, "dimension line says 0 dimensions"));
    }
    out.dim = dim;
    if r.looks_binary()? {
        read_binary(&mut r, n, keep, out)
    } else {
        read_text(&mut r, keep, out)
    }
}

/// The longest entry (a word and its vector) a vectors file may hold.
pub const MAX_ENTRY: u64 = 1 << 20;

/// A vectors file being read: its reader and the number of the last line read.
struct Entries<'a> {
    reader: BufReader<crate::io::File>,
    path: &'a Path,
    line: usize,
}

impl Entries<'_> {
    fn bad(&self, line: usize, why: &str) -> Error {
        Error::Input(format!("{}:{line}: {why}", self.path.display()))
    }

    /// The bytes up to `stop` (consumed, not returned), at most [`MAX_ENTRY`]; `None` at the
    /// end of the file.
    fn until(&mut self, stop: u8) -> Result<Option<Vec<u8>>> {
        let mut buf = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_ENTRY + 1)
            .read_until(stop, &mut buf)
            .map_err(|e| Error::io(self.path, e))?;
        if n == 0 {
            return Ok(None);
        }
        if buf.len() as u64 > MAX_ENTRY {
            return Err(self.bad(self.line + 1, "an entry longer than 1 MiB"));
        }
        if buf.last() == Some(&stop) {
            buf.pop();
        }
        Ok(Some(buf))
    }

    /// The next text line (lossy UTF-8, line ending removed).
    fn line(&mut self) -> Result<Option<String>> {
        let Some(bytes) = self.until(b'\n')? else {
            return Ok(None);
        };
        self.line += 1;
        Ok(Some(String::from_utf8_lossy(&bytes).trim_end().to_string()))
    }

    /// Whether the entries after a word2vec header are binary: their first bytes hold a
    /// control character other than white space, or are not UTF-8 (packed floats practically
    /// always do; text never does).
    fn looks_binary(&mut self) -> Result<bool> {
        let buf = self
            .reader
            .fill_buf()
            .map_err(|e| Error::io(self.path, e))?;
        let text = match std::str::from_utf8(buf) {
            Ok(t) => t,
            // A character cut at the end of the buffer is still text.
            Err(e) if e.error_len().is_none() => {
                std::str::from_utf8(&buf[..e.valid_up_to()]).expect("valid prefix")
            }
            Err(_) => return Ok(true),
        };
        Ok(text
            .bytes()
            .any(|b| b.is_ascii_control() && !b.is_ascii_whitespace()))
    }
}

/// The remaining lines as `word v1 … vD` entries.
fn read_text(
    r: &mut Entries<'_>,
    keep: &dyn Fn(&str) -> bool,
    mut out: WordVectors,
) -> Result<WordVectors> {
    while let Some(line) = r.line()? {
        parse_line(&line, r.line, keep, &mut out, r)?;
    }
    Ok(out)
}

/// `n` binary entries: `word␠` then `dim` little-endian f32, an optional newline after each.
fn read_binary(
    r: &mut Entries<'_>,
    n: usize,
    keep: &dyn Fn(&str) -> bool,
    mut out: WordVectors,
) -> Result<WordVectors> {
    let mut vector = vec![0u8; 4 * out.dim];
    for i in 0..n {
        let entry = i + 2;
        let word = r
            .until(b' ')?
            .ok_or_else(|| r.bad(entry, "truncated binary entry"))?;
        let word = String::from_utf8_lossy(&word).trim().to_lowercase();
        r.reader
            .read_exact(&mut vector)
            .map_err(|_| r.bad(entry, "truncated binary vector"))?;
        if keep(&word) {
            out.words.push(word);
            out.values.extend(
                vector
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
        }
        let next = r.reader.fill_buf().map_err(|e| Error::io(r.path, e))?;
        if next.first() == Some(&b'\n') {
            r.reader.consume(1);
        }
    }
    Ok(out)
}

/// One text entry, line `n`: stored when its word is kept.
fn parse_line(
    line: &str,
    n: usize,
    keep: &dyn Fn(&str) -> bool,
    out: &mut WordVectors,
    r: &Entries<'_>,
) -> Result<()> {
    if line.trim().is_empty() {
        return Ok(());
    }
    let dim = out.dim;
    let mut it = line.split_whitespace();
    let word = it.next().unwrap_or("").to_lowercase();
    let vals: Vec<&str> = it.collect();
    if vals.len() != dim {
        return Err(r.bad(n, &format!("{} values, the dimension is {dim}", vals.len())));
    }
    let parsed: std::result::Result<Vec<f32>, _> = vals.iter().map(|v| v.parse::<f32>()).collect();
    let v = parsed.map_err(|_| r.bad(n, "non-numeric value"))?;
    if keep(&word) {
        out.words.push(word);
        out.values.extend(v);
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
    nearest_rows(m, k)
        .into_iter()
        .map(|row| row.into_iter().map(|(j, _)| j).collect())
        .collect()
}

/// For each row of `m` ([n, dim], on any device), its `k` most cosine-similar other rows with
/// their cosines, the most similar first (the lower row on ties). Blocks of rows are multiplied
/// against all of them on the device; each row's best are found by the device's top-k, or on
/// the host selected in place on all cores (a full sort of each row costs far more there).
pub fn nearest_rows(m: Tensor<2>, k: usize) -> Vec<Vec<(usize, f32)>> {
    let [n, dim] = m.dims();
    if n < 2 || k == 0 {
        return vec![Vec::new(); n];
    }
    let on_host = crate::kernels::on_host(&m.device());
    let norms = m.clone().square().sum_dim(1).sqrt().clamp_min(1e-12);
    let m = m / norms;
    let mt = m.clone().transpose();
    let kk = (k + 1).min(n);
    let mut out = Vec::with_capacity(n);
    for start in (0..n).step_by(BLOCK) {
        let end = (start + BLOCK).min(n);
        let sims = m.clone().slice([start..end, 0..dim]).matmul(mt.clone());
        let best = if on_host {
            host_top_k(sims, kk)
        } else {
            device_top_k(sims, kk)
        };
        for (r, row) in best.chunks(kk).enumerate() {
            let me = start + r;
            out.push(
                row.iter()
                    .copied()
                    .filter(|&(j, _)| j != me)
                    .take(k)
                    .collect(),
            );
        }
    }
    out
}

/// Each row's `k` largest (column, value), largest first, by the device's top-k.
fn device_top_k(sims: Tensor<2>, k: usize) -> Vec<(usize, f32)> {
    let (values, idx) = sims.topk_with_indices(k, 1);
    let values: Vec<f32> = values
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .expect("f32");
    let idx: Vec<i64> = idx
        .into_data()
        .convert::<i64>()
        .try_into_vec::<i64>()
        .expect("indices");
    idx.into_iter().map(|j| j as usize).zip(values).collect()
}

/// [`device_top_k`] on the host: each row's best selected in place (the lower column on
/// ties), rows in parallel.
fn host_top_k(sims: Tensor<2>, k: usize) -> Vec<(usize, f32)> {
    use rayon::prelude::*;
    let [_, n] = sims.dims();
    let values = sims
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .expect("f32");
    let order = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    values
        .par_chunks(n)
        .flat_map_iter(|row| {
            let mut v: Vec<(usize, f32)> = row.iter().copied().enumerate().collect();
            if k < v.len() {
                v.select_nth_unstable_by(k - 1, order);
                v.truncate(k);
            }
            v.sort_unstable_by(order);
            v
        })
        .collect()
}

/// Rows of similarities [`nearest_rows`] computes at a time.
const BLOCK: usize = 1024;

/// Bytes [`top_k_neighbours`] holds at its peak for `n` vectors of `dim` values: the matrix,
/// its normalised copy and transpose, and a block of similarities with its top-k sort.
pub fn neighbours_bytes(n: usize, dim: usize) -> f64 {
    4.0 * (3.0 * (n * dim) as f64 + 3.0 * (BLOCK.min(n) * n) as f64)
}

/// Neighbour pairs (word, word) for the table builder, after the memory check.
pub fn neighbour_map(
    vectors: &WordVectors,
    k: usize,
    device: &Device,
) -> Result<HashMap<String, Vec<String>>> {
    let n = vectors.words.len();
    crate::memory::check(
        neighbours_bytes(n, vectors.dim),
        &format!(
            "the neighbour search over {n} words of {} dimensions",
            vectors.dim
        ),
        "give vectors for fewer words, or a smaller vocabulary",
    )?;
    let nb = top_k_neighbours(vectors, k, device);
    Ok(vectors
        .words
        .iter()
        .zip(nb)
        .map(|(w, list)| {
            (
                w.clone(),
                list.into_iter().map(|j| vectors.words[j].clone()).collect(),
            )
        })
        .collect())
}
