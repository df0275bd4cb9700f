//! The fused multi-head self-attention kernel on the host, forward and backward:
//!
//! `S = Q Kᵀ / √d + b`, `P = softmax(S)` by rows, `P̃ = P ⊙ M`, `C = P̃ V`, per head, where `b`
//! is the additive key bias (0, or a large negative number on padded keys) and `M` the dropout
//! mask (0 with probability p, else 1 / (1 − p)). With `G = ∂L/∂C`:
//!
//! `∂V = P̃ᵀ G`, `∂P = (G Vᵀ) ⊙ M`, `∂S = P ⊙ (∂P − rowsum(∂P ⊙ P))`,
//! `∂Q = ∂S K / √d`, `∂K = ∂Sᵀ Q / √d`.
//!
//! Q, K and V come packed as the one product of the three projections, `[batch, len, 3 · hidden]`
//! (Q, then K, then V on each row), and their gradient goes back in that layout; C is
//! `[batch, len, hidden]`. A head is a strided block of either, so no transposes are copied.
//! Each head is one task for rayon: its scores and products are computed in one pass with its
//! own `L × L` buffers. The probabilities `P` are
//! kept for the backward pass; the mask is drawn again from its seed (stream = head index),
//! so it costs no memory and does not depend on the thread count.

use std::mem::MaybeUninit;

use multiversion::multiversion;
use rayon::prelude::*;

use super::super::dropout::fill_mask;
use super::super::gemm::{Products, View, ViewMut, product_as};
use super::super::simd::{dot, exp_non_positive, max_lanes, sum_map};

/// The sizes of one attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub batch: usize,
    pub len: usize,
    pub heads: usize,
    pub head_dim: usize,
}

impl Dims {
    pub fn hidden(&self) -> usize {
        self.heads * self.head_dim
    }

    fn scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }

    /// Row width of the packed projections.
    fn packed(&self) -> usize {
        3 * self.hidden()
    }

    /// Offset of head `head` (batch-major) of block `part` (Q, K, V: 0, 1, 2; the context: 0)
    /// in a `[batch, len, width]` buffer.
    fn offset(&self, head: usize, part: usize, width: usize) -> usize {
        let (b, h) = (head / self.heads, head % self.heads);
        b * self.len * width + part * self.hidden() + h * self.head_dim
    }

    /// Head `head` of block `part` of a `[batch, len, width]` buffer as a `len × head_dim` view.
    fn block(&self, data: &[f32], head: usize, part: usize, width: usize) -> View {
        let offset = self.offset(head, part, width);
        View::rows(data, offset, self.len, self.head_dim, width)
    }

    /// Head `head` of a `[batch, len, hidden]` buffer (the context's gradient).
    fn view(&self, data: &[f32], head: usize) -> View {
        self.block(data, head, 0, self.hidden())
    }

    /// Head `head` of Q, K or V (`part` 0, 1, 2) in the packed projections.
    fn projection(&self, qkv: &[f32], head: usize, part: usize) -> View {
        self.block(qkv, head, part, self.packed())
    }

    fn check(&self, name: &str, data: &[f32], width: usize) {
        assert_eq!(
            data.len(),
            self.batch * self.len * width,
            "attention: {name} is not [batch, len, {width}]"
        );
    }
}

/// Attention dropout: probability and the per-call seed of its mask.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DropMask {
    pub p: f64,
    pub seed: u64,
}

impl DropMask {
    fn fill(&self, head: usize, out: &mut [f32]) {
        fill_mask(out, self.p, self.seed, head as u64);
    }
}

/// A `[batch, len, width]` output buffer that heads (disjoint column blocks) write in parallel.
struct Output {
    ptr: *mut f32,
    dims: Dims,
    width: usize,
}

unsafe impl Send for Output {}
unsafe impl Sync for Output {}

impl Output {
    /// Over a fresh buffer that the heads' products write whole (so it may be uninitialised).
    fn new(data: &mut [MaybeUninit<f32>], dims: Dims, width: usize) -> Self {
        assert_eq!(
            data.len(),
            dims.batch * dims.len * width,
            "attention: an output is not [batch, len, {width}]"
        );
        Self {
            ptr: data.as_mut_ptr().cast(),
            dims,
            width,
        }
    }

    /// Head `head` of block `part` as a writable `len × head_dim` view.
    fn head(&self, head: usize, part: usize) -> ViewMut {
        let d = self.dims;
        ViewMut {
            // In bounds: `offset` + (len − 1) · width + head_dim ≤ batch · len · width, as
            // (part + 1) · hidden ≤ width.
            ptr: unsafe { self.ptr.add(d.offset(head, part, self.width)) },
            rows: d.len,
            cols: d.head_dim,
            rs: self.width as isize,
            cs: 1,
        }
    }
}

/// Context `C` `[batch, len, hidden]` from the packed projections `qkv`
/// `[batch, len, 3 · hidden]` and, when `keep`, the probabilities `P` `[batch, heads, len, len]`
/// (else an empty vector). `key_bias` is `[batch, len]`. The products multiply as `products`
/// says; the scores, the softmax and the context stay f32.
pub fn forward(
    qkv: &[f32],
    key_bias: &[f32],
    dims: Dims,
    dropout: Option<DropMask>,
    keep: bool,
    products: Products,
) -> (Vec<f32>, Vec<f32>) {
    dims.check("qkv", qkv, dims.packed());
    let l = dims.len;
    assert_eq!(key_bias.len(), dims.batch * l, "attention: key bias shape");
    let head_pass =
        |out: &Output, head: usize, p: &mut [MaybeUninit<f32>], dropped: &mut Vec<f32>| {
            let kt = dims.projection(qkv, head, 1).t();
            // Safety: `p` is this task's own `L × L` buffer, which the product writes whole
            // without reading it (`gemm::product_new`); Q and K are read only.
            let p = unsafe {
                product_as(
                    ViewMut::uninit(p, l, l),
                    dims.projection(qkv, head, 0),
                    kt,
                    dims.scale(),
                    products,
                );
                &mut *(p as *mut [MaybeUninit<f32>] as *mut [f32])
            };
            let b = head / dims.heads;
            softmax_rows(p, &key_bias[b * l..(b + 1) * l]);
            let weights: &[f32] = match dropout {
                Some(mask) => {
                    dropped.resize(l * l, 0.0);
                    mask.fill(head, dropped);
                    for (m, &p) in dropped.iter_mut().zip(p.iter()) {
                        *m *= p;
                    }
                    dropped
                }
                None => p,
            };
            // Safety: each head writes its own column block of the context.
            unsafe {
                product_as(
                    out.head(head, 0),
                    View::rows(weights, 0, l, l, l),
                    dims.projection(qkv, head, 2),
                    1.0,
                    products,
                )
            };
        };
    let heads = dims.batch * dims.heads;
    let write = |ctx: &mut [MaybeUninit<f32>]| {
        let out = Output::new(ctx, dims, dims.hidden());
        if !keep {
            (0..heads).into_par_iter().for_each_init(
                || (Vec::with_capacity(l * l), Vec::new()),
                |(p, dropped), head| {
                    head_pass(&out, head, &mut p.spare_capacity_mut()[..l * l], dropped)
                },
            );
            return Vec::new();
        }
        let write_probs = |probs: &mut [MaybeUninit<f32>]| {
            probs
                .par_chunks_mut(l * l)
                .enumerate()
                .for_each_init(Vec::new, |dropped, (head, p)| {
                    head_pass(&out, head, p, dropped)
                })
        };
        // Safety: each head writes its own `L × L` block of the probabilities whole.
        unsafe { super::super::buffers::filled_by(heads * l * l, write_probs) }.0
    };
    // Safety: the heads' column blocks cover the context, and each head's last product writes
    // its block whole without reading it (`gemm::product_new`).
    let (ctx, probs) =
        unsafe { super::super::buffers::filled_by(dims.batch * l * dims.hidden(), write) };
    (ctx, probs)
}

/// `P = softmax(S + b)` in place, row by row.
#[multiversion(targets = "simd")]
fn softmax_rows(s: &mut [f32], bias: &[f32]) {
    for row in s.chunks_exact_mut(bias.len()) {
        for (x, &b) in row.iter_mut().zip(bias) {
            *x += b;
        }
        let max = max_lanes(row);
        for x in row.iter_mut() {
            *x = exp_non_positive(*x - max);
        }
        let inv = 1.0 / sum_map(row, |x| x);
        for x in row.iter_mut() {
            *x *= inv;
        }
    }
}

/// The gradient of the packed projections `[batch, len, 3 · hidden]` (`∂Q`, `∂K`, `∂V` on each
/// row) from `G = ∂L/∂C` and the kept `P`, the products multiplied as `products` says.
pub fn backward(
    grad: &[f32],
    qkv: &[f32],
    probs: &[f32],
    dims: Dims,
    dropout: Option<DropMask>,
    products: Products,
) -> Vec<f32> {
    dims.check("grad", grad, dims.hidden());
    dims.check("qkv", qkv, dims.packed());
    let l = dims.len;
    let heads = dims.batch * dims.heads;
    assert_eq!(probs.len(), heads * l * l, "attention: probabilities shape");
    let square = |data: &[f32]| View::rows(data, 0, l, l, l);
    let write = |dqkv: &mut [MaybeUninit<f32>]| {
        let out = Output::new(dqkv, dims, dims.packed());
        (0..heads).into_par_iter().for_each_init(
            || (vec![0f32; l * l], Vec::new(), Vec::new()),
            |(ds, mask, dropped), head| {
                let p = &probs[head * l * l..(head + 1) * l * l];
                let g = dims.view(grad, head);
                let weights: &[f32] = match dropout {
                    Some(m) => {
                        mask.resize(l * l, 0.0);
                        m.fill(head, mask);
                        dropped.clear();
                        dropped.extend(mask.iter().zip(p).map(|(m, p)| m * p));
                        dropped
                    }
                    None => p,
                };
                // Safety: every output view is this head's own block; `ds` is this task's buffer.
                unsafe {
                    product_as(out.head(head, 2), square(weights).t(), g, 1.0, products);
                    product_as(
                        ViewMut::rows(ds, 0, l, l, l),
                        g,
                        dims.projection(qkv, head, 2).t(),
                        1.0,
                        products,
                    );
                }
                softmax_backward_rows(ds, p, dropout.is_some().then_some(&mask[..]), l);
                unsafe {
                    product_as(
                        out.head(head, 0),
                        square(ds),
                        dims.projection(qkv, head, 1),
                        dims.scale(),
                        products,
                    );
                    product_as(
                        out.head(head, 1),
                        square(ds).t(),
                        dims.projection(qkv, head, 0),
                        dims.scale(),
                        products,
                    );
                }
            },
        );
    };
    // Safety: the heads' blocks of ∂Q, ∂K and ∂V cover the buffer, and each is written whole by
    // a product that does not read it (`gemm::product_new`).
    let (dqkv, ()) = unsafe { super::super::buffers::filled_by(qkv.len(), write) };
    dqkv
}

/// `∂S` in place from `∂P` in `ds` (times the dropout `mask`, if any) and `P`, row by row:
/// `∂S_ij = P_ij · (∂P_ij − Σ_k ∂P_ik · P_ik)`.
#[multiversion(targets = "simd")]
fn softmax_backward_rows(ds: &mut [f32], p: &[f32], mask: Option<&[f32]>, l: usize) {
    for (i, (row, p)) in ds.chunks_exact_mut(l).zip(p.chunks_exact(l)).enumerate() {
        if let Some(mask) = mask {
            for (x, &m) in row.iter_mut().zip(&mask[i * l..(i + 1) * l]) {
                *x *= m;
            }
        }
        let r = dot(row, p);
        for (x, &p) in row.iter_mut().zip(p) {
            *x = p * (*x - r);
        }
    }
}
