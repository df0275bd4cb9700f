//! Matrix products with bf16 operands and f32 accumulation, on x86 CPUs with AVX-512 BF16
//! (`vdpbf16ps`: 16 lanes, each adding two bf16 products to an f32 sum).
//!
//! `dst = [dst +] scale · a · b`: the operands are rounded to bf16 as they are packed
//! (`bf16_pack`: the inner dimension in pairs, two values in one 32-bit
//! lane), the sums are f32, `dst` stays f32. A tile of `MR` × `NR` sums broadcasts the left
//! operand's pair to all lanes against two vectors of the right operand's. The work is split
//! over row blocks of `dst` (never over the inner dimension: the result does not depend on the
//! thread count).

use super::bf16_pack::{GROUP, LANES, Left, MR, NR, pack_left, pack_right};
pub use super::bf16_pack::{from_bf16, to_bf16};
use super::views::{View, ViewMut};

/// Columns of a chunk of a wide product: a block of its packed right operand is at most
/// [`KP`] · 1024 lanes, 1 MiB.
const NC: usize = 1024;

/// Pairs of the inner dimension per block (512 values): a block of the packed right operand
/// for 1024 columns is 1 MiB.
const KP: usize = 256;

/// Whether this CPU runs the kernel.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// What a product's sums are added onto as they are stored.
#[derive(Clone, Copy)]
enum Onto {
    /// Nothing: `dst = scale · sums`.
    Nothing,
    /// What `dst` holds.
    Dst,
    /// The same row of values (a bias) for every row of `dst`; the pointer is at the row's
    /// value for `dst`'s first column (for a block or tile: its own first column).
    Row(*const f32),
}

// SAFETY: a bias row is only read, and outlives the product that reads it (the caller's
// borrow).
unsafe impl Send for Onto {}
unsafe impl Sync for Onto {}

impl Onto {
    /// The same, for a block or tile `cols` columns to the right.
    fn shifted(self, cols: usize) -> Self {
        match self {
            // SAFETY: the callers shift a bias row to columns inside it.
            Onto::Row(row) => Onto::Row(unsafe { row.add(cols) }),
            other => other,
        }
    }

    /// The value the sums of column `j` (from the pointer's column) are added onto, `dst`
    /// holding `held` there; none for `Nothing` (the sums are stored as they are).
    ///
    /// # Safety
    /// A bias row holds column `j`.
    unsafe fn base(self, held: f32, j: usize) -> Option<f32> {
        match self {
            Onto::Nothing => None,
            Onto::Dst => Some(held),
            // SAFETY: the caller's.
            Onto::Row(values) => Some(unsafe { *values.add(j) }),
        }
    }
}

/// Where one tile's sums go: `dst = onto + scale · sums` on the first `rows` rows and `cols`
/// columns of a row-contiguous block at `ptr`, rows `rs` apart.
#[derive(Clone, Copy)]
struct Sink {
    ptr: *mut f32,
    rs: isize,
    rows: usize,
    cols: usize,
    onto: Onto,
    scale: f32,
}

/// One tile: the sums of `kp` pairs of packed lanes (`a` as [`pack_left`] lays them out,
/// [`Left::PairMajor`] where `PAIR_MAJOR`; `b` one panel of [`pack_right`]), `[MR][NR]`, met
/// with `sink`'s block as it says. The block is fetched into the cache while the sums run.
///
/// # Safety
/// The CPU has AVX-512 F and BF16 ([`available`]); `a` holds `kp · LANES` lanes, `b` `kp · NR`;
/// `sink` has at most `MR` rows and `NR` columns, valid for reads and writes, that no other
/// thread touches meanwhile.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn tile<const PAIR_MAJOR: bool>(kp: usize, a: &[u32], b: &[u32], sink: Sink) {
    use std::arch::x86_64::*;
    use std::mem::transmute;
    for i in 0..sink.rows {
        // SAFETY: prefetching reads nothing; the addresses are the block's rows.
        unsafe {
            let row = sink.ptr.offset(i as isize * sink.rs).cast::<i8>();
            _mm_prefetch::<_MM_HINT_T0>(row);
            _mm_prefetch::<_MM_HINT_T0>(row.add(64));
        }
    }
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    for p in 0..kp {
        // SAFETY: `b` holds NR lanes at pair p, `a` MR.
        let (b0, b1) = unsafe {
            (
                _mm512_loadu_si512(b.as_ptr().add(p * NR).cast()),
                _mm512_loadu_si512(b.as_ptr().add(p * NR + 16).cast()),
            )
        };
        // SAFETY: the same 512 bits, read as 32 bf16 values.
        let (b0, b1): (__m512bh, __m512bh) = unsafe {
            (
                transmute::<__m512i, __m512bh>(b0),
                transmute::<__m512i, __m512bh>(b1),
            )
        };
        for (i, sums) in acc.iter_mut().enumerate() {
            let at = if PAIR_MAJOR {
                p * LANES + i
            } else {
                i * kp + p
            };
            // SAFETY: `a` holds kp lanes of each of its MR rows, in its layout.
            let ai = unsafe { *a.as_ptr().add(at) };
            // SAFETY: as above.
            let ai: __m512bh =
                unsafe { transmute::<__m512i, __m512bh>(_mm512_set1_epi32(ai as i32)) };
            sums[0] = _mm512_dpbf16_ps(sums[0], ai, b0);
            sums[1] = _mm512_dpbf16_ps(sums[1], ai, b1);
        }
    }
    let columns = |n: usize| ((1u32 << n.min(16)) - 1) as __mmask16;
    let (first, second) = (columns(sink.cols), columns(sink.cols.saturating_sub(16)));
    let scale = _mm512_set1_ps(sink.scale);
    for (i, sums) in acc.iter().enumerate().take(sink.rows) {
        // SAFETY: row i of the block, and a bias row, hold `cols` values from their first; the
        // masks cover those alone (a masked lane is neither read nor written; the second
        // vector's address may lie past them, so it is only computed, with `wrapping_add`).
        unsafe {
            let row = sink.ptr.offset(i as isize * sink.rs);
            let mut lo = _mm512_mul_ps(scale, sums[0]);
            let mut hi = _mm512_mul_ps(scale, sums[1]);
            let base = match sink.onto {
                Onto::Nothing => None,
                Onto::Dst => Some(row.cast_const()),
                Onto::Row(values) => Some(values),
            };
            if let Some(base) = base {
                lo = _mm512_add_ps(_mm512_maskz_loadu_ps(first, base), lo);
                hi = _mm512_add_ps(_mm512_maskz_loadu_ps(second, base.wrapping_add(16)), hi);
            }
            _mm512_mask_storeu_ps(row, first, lo);
            _mm512_mask_storeu_ps(row.wrapping_add(16), second, hi);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile<const PAIR_MAJOR: bool>(_: usize, _: &[u32], _: &[u32], _: Sink) {
    unreachable!("the bf16 kernel runs on x86-64 only")
}

/// Rows `rows` of `dst` for the pairs `p0 .. p0 + kp`: `dst = onto + scale · a · b` over
/// them, the left operand packed [`GROUP`] row blocks at a time.
///
/// # Safety
/// As [`product`]; `packed` is [`pack_right`] of the same pairs.
unsafe fn rows_block(
    dst: &ViewMut,
    a: &View,
    packed: &[u32],
    block: PairBlock,
    rows: std::ops::Range<usize>,
) {
    let PairBlock { p0, kp, .. } = block;
    let pair_major = Left::of(a) == Left::PairMajor;
    LEFTS.with_borrow_mut(|lefts| {
        // Every lane a tile reads is written by `pack_left` first: the buffer is zeroed only
        // when it grows.
        if lefts.len() < GROUP * kp * LANES {
            lefts.resize(GROUP * kp * LANES, 0);
        }
        for g0 in rows.clone().step_by(MR * GROUP) {
            let blocks = (rows.end - g0).div_ceil(MR).min(GROUP);
            // SAFETY: the caller's.
            unsafe { pack_left(a, g0, blocks, p0, kp, lefts) };
            for (b, left) in lefts.chunks(kp * LANES).take(blocks).enumerate() {
                let r0 = g0 + b * MR;
                let tile_rows = r0..(r0 + MR).min(rows.end);
                // SAFETY: the caller's; `left` is these rows' packed lanes.
                unsafe { row_tiles(dst, left, packed, block, tile_rows, pair_major) };
            }
        }
    })
}

thread_local! {
    /// Each thread's packed lanes of the left operand, kept from product to product.
    static LEFTS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The tiles of at most [`MR`] rows `rows` of `dst` against every panel of `packed`, `left`
/// their packed lanes (laid out as `pair_major` says). A tile meets a row-contiguous `dst` in
/// place; any other `dst` through a buffer.
///
/// # Safety
/// As [`rows_block`].
unsafe fn row_tiles(
    dst: &ViewMut,
    left: &[u32],
    packed: &[u32],
    block: PairBlock,
    rows: std::ops::Range<usize>,
    pair_major: bool,
) {
    let PairBlock {
        kp, onto, scale, ..
    } = block;
    let mut out = [0f32; MR * NR];
    let (r0, tile_rows) = (rows.start, rows.len());
    for (panel, right) in packed.chunks(kp * NR).enumerate() {
        let cols = NR.min(dst.cols - panel * NR);
        let first = r0 as isize * dst.rs + (panel * NR) as isize * dst.cs;
        let onto = onto.shifted(panel * NR);
        let sink = if dst.cs == 1 {
            Sink {
                // SAFETY: the tile's first element, inside `dst`.
                ptr: unsafe { dst.ptr.offset(first) },
                rs: dst.rs,
                rows: tile_rows,
                cols,
                onto,
                scale,
            }
        } else {
            Sink {
                ptr: out.as_mut_ptr(),
                rs: NR as isize,
                rows: tile_rows,
                cols,
                onto: Onto::Nothing,
                scale,
            }
        };
        // SAFETY: `available()` was checked by `product`; the slices have their sizes; the
        // sink is this call's own rows of `dst`, or `out`.
        unsafe {
            if pair_major {
                tile::<true>(kp, left, right, sink)
            } else {
                tile::<false>(kp, left, right, sink)
            }
        };
        if dst.cs == 1 {
            continue;
        }
        for i in 0..tile_rows {
            for (j, s) in out[i * NR..][..cols].iter().enumerate() {
                // SAFETY: inside `dst`, in rows this call alone writes; a bias row holds the
                // tile's columns.
                unsafe {
                    let d = dst
                        .ptr
                        .offset(first + i as isize * dst.rs + j as isize * dst.cs);
                    *d = onto.base(*d, j).map_or(*s, |base| base + s);
                }
            }
        }
    }
}

/// One block of pairs of the inner dimension and how its sums meet `dst`.
#[derive(Clone, Copy)]
struct PairBlock {
    p0: usize,
    kp: usize,
    onto: Onto,
    scale: f32,
}

/// `dst = [dst +] scale · a · b` in bf16 products with f32 sums, on `threads` of rayon's
/// threads (0 or 1: the calling thread).
///
/// # Safety
/// [`available`] is true; every view points at memory valid for its extent, and `dst` overlaps
/// neither `a` nor `b` and is not written by another thread meanwhile.
pub unsafe fn product(
    dst: ViewMut,
    a: View,
    b: View,
    accumulate: bool,
    scale: f32,
    threads: usize,
) {
    let onto = if accumulate { Onto::Dst } else { Onto::Nothing };
    // SAFETY: the caller's.
    unsafe { multiply(dst, a, b, onto, scale, threads) }
}

/// `dst = bias + a · b`, `bias` added to every row as the sums are stored (no pass of its
/// own over `dst`, which is not read), on `threads` of rayon's threads.
///
/// # Safety
/// As [`product`]; `bias` holds `b.cols` values.
pub unsafe fn product_onto_rows(dst: ViewMut, a: View, b: View, bias: &[f32], threads: usize) {
    assert_eq!(bias.len(), b.cols, "bias width");
    // SAFETY: the caller's; the bias row spans every column of `dst`.
    unsafe { multiply(dst, a, b, Onto::Row(bias.as_ptr()), 1.0, threads) }
}

/// `dst = onto + scale · a · b`.
///
/// # Safety
/// As [`product`]; a bias row (`Onto::Row`) holds `b.cols` values.
unsafe fn multiply(dst: ViewMut, a: View, b: View, onto: Onto, scale: f32, threads: usize) {
    assert_eq!(a.cols, b.rows, "inner dimensions");
    assert_eq!((dst.rows, dst.cols), (a.rows, b.cols), "output shape");
    assert!(available(), "the CPU has no AVX-512 BF16");
    if b.cols > NC {
        // A wide product (the MLM decoder's `x·Eᵀ`, 30522 columns) in column chunks, each on
        // one thread: its packed right operand stays in that core's cache for every row block,
        // instead of the whole packed operand streaming from memory once per row block.
        let chunk = |c0: usize| {
            let cols = NC.min(b.cols - c0);
            // SAFETY: the caller's; each chunk writes its own columns of `dst`.
            unsafe {
                multiply(
                    dst.columns(c0, cols),
                    a,
                    b.columns(c0, cols),
                    onto.shifted(c0),
                    scale,
                    1,
                )
            }
        };
        if threads > 1 {
            use rayon::prelude::*;
            (0..b.cols).into_par_iter().step_by(NC).for_each(chunk);
        } else {
            (0..b.cols).step_by(NC).for_each(chunk);
        }
        return;
    }
    let pairs = a.cols.div_ceil(2);
    if pairs == 0 {
        for i in 0..dst.rows {
            for j in 0..dst.cols {
                // SAFETY: inside `dst`.
                unsafe {
                    let d = dst.ptr.offset(i as isize * dst.rs + j as isize * dst.cs);
                    *d = onto.base(*d, j).unwrap_or(0.0);
                }
            }
        }
        return;
    }
    let mut packed = Vec::new();
    for p0 in (0..pairs).step_by(KP) {
        let kp = KP.min(pairs - p0);
        // SAFETY: the caller's.
        unsafe { pack_right(&b, p0, kp, threads, &mut packed) };
        let block = PairBlock {
            p0,
            kp,
            onto: if p0 > 0 { Onto::Dst } else { onto },
            scale,
        };
        let blocks = threads.max(1).min(a.rows.div_ceil(MR)).max(1);
        let per = a.rows.div_ceil(MR).div_ceil(blocks) * MR;
        let run = |t: usize| {
            let rows = (t * per).min(a.rows)..((t + 1) * per).min(a.rows);
            // SAFETY: each block writes its own rows of `dst`.
            unsafe { rows_block(&dst, &a, &packed, block, rows) };
        };
        if blocks == 1 {
            run(0);
        } else {
            use rayon::prelude::*;
            (0..blocks).into_par_iter().for_each(run);
        }
    }
}
