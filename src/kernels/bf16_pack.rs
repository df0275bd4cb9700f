//! The operands of the bf16 matrix product (`kernels::gemm_bf16`) rounded to bf16 (round to
//! nearest even) and packed as lanes of pairs of the inner dimension.
//!
//! The packed right operand holds, for each pair of rows (2p, 2p+1) and each column j, the two
//! values side by side in one 32-bit lane, in panels of [`NR`] columns; the left operand's
//! lanes (a[i, 2p], a[i, 2p+1]) are packed row by row where it is row-major, pair by pair where
//! it is transposed (the weight gradients `xᵀ·G`: a pair of its columns holds the lanes of 16
//! rows side by side), so that both pack with whole-vector conversions. A right operand with
//! contiguous columns (`x·Eᵀ`) converts sixteen pairs of a column at a time, and sixteen
//! columns' lanes transposed are sixteen pairs'. Beyond an operand, and for an odd inner
//! dimension, the lanes are zero. (The vector conversion, `vcvtne2ps2bf16`, takes a subnormal
//! value as zero; the scalar one, on the edges, keeps it.)

use std::mem::MaybeUninit;

use super::views::View;

/// Rows and columns of `dst` one micro-kernel call computes: 14 × 2 vectors of 16 lanes of
/// sums, two of the right operand and a broadcast, 31 of the 32 vector registers.
pub(super) const MR: usize = 14;
pub(super) const NR: usize = 32;

/// `x` rounded to bf16 (to nearest, ties to even; a NaN stays a NaN), as its 16 bits.
pub fn to_bf16(x: f32) -> u16 {
    bf16_bits(x.to_bits()) as u16
}

/// [`to_bf16`] on the bits, without a branch (so that the packing loops vectorise).
#[inline(always)]
fn bf16_bits(u: u32) -> u32 {
    let nan = (u & 0x7fff_ffff) > 0x7f80_0000;
    let rounded = u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16;
    if nan { (u >> 16) | 0x40 } else { rounded }
}

/// Two values as one lane of a pair: `lo` in the low half.
#[inline(always)]
fn lane(lo: f32, hi: f32) -> u32 {
    bf16_bits(lo.to_bits()) | (bf16_bits(hi.to_bits()) << 16)
}

/// The value of bf16 bits `h`.
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// `m`'s line `i` (a row where `cs` is 1, a column where `rs` is 1) as a slice of `len`
/// values.
///
/// # Safety
/// `m` points at memory valid for its extent; the line's values are contiguous.
unsafe fn line<'a>(m: &View, i: usize, stride: isize, len: usize) -> &'a [f32] {
    // SAFETY: the caller's.
    unsafe { std::slice::from_raw_parts(m.ptr.offset(i as isize * stride), len) }
}

/// Element (r, c) of `m`, zero outside it.
///
/// # Safety
/// `m` points at memory valid for its extent.
#[inline]
unsafe fn at(m: &View, r: usize, c: usize) -> f32 {
    if r < m.rows && c < m.cols {
        // SAFETY: inside the view.
        unsafe { *m.ptr.offset(r as isize * m.rs + c as isize * m.cs) }
    } else {
        0.0
    }
}

/// The right operand's pairs `p0 .. p0 + kp` packed in panels of [`NR`] columns into `out`:
/// `[panel][pair][NR]` lanes, each (b[2p, j], b[2p + 1, j]); beyond `b` zero. The panels are
/// packed on `threads` threads. `out` is reused from block to block: every lane is written, so
/// it is never zeroed first.
///
/// # Safety
/// `b` points at memory valid for its extent; the CPU runs the kernel
/// ([`available`](super::gemm_bf16::available)).
pub(super) unsafe fn pack_right(
    b: &View,
    p0: usize,
    kp: usize,
    threads: usize,
    out: &mut Vec<u32>,
) {
    let len = b.cols.div_ceil(NR) * kp * NR;
    out.clear();
    out.reserve(len);
    let lanes = &mut out.spare_capacity_mut()[..len];
    // Up to PANELS panels a task, while each thread still gets four tasks to share.
    let per = (b.cols.div_ceil(NR) / (4 * threads.max(1))).clamp(1, PANELS);
    // SAFETY (each call): the caller's; each group of panels writes its own chunk, every
    // lane of it.
    let group = |(g, chunk): (usize, &mut [MaybeUninit<u32>])| unsafe {
        pack_panels(b, p0, kp, g * per, chunk)
    };
    if threads > 1 {
        use rayon::prelude::*;
        lanes
            .par_chunks_mut(per * kp * NR)
            .enumerate()
            .for_each(group);
    } else {
        lanes.chunks_mut(per * kp * NR).enumerate().for_each(group);
    }
    // SAFETY: the panels wrote all `len` lanes.
    unsafe { out.set_len(len) };
}

/// Panels of the right operand packed together (a row-major operand's rows are read as runs
/// of this many panels' columns).
const PANELS: usize = 4;

/// The panels from `first` of [`pack_right`] into `out` (`kp · NR` lanes each, every one
/// written; as many panels as `out` holds). Where columns are contiguous, panel by panel;
/// otherwise pair by pair, each pair's two rows read as one run across the panels.
///
/// # Safety
/// `b` points at memory valid for its extent; the CPU runs the kernel
/// ([`available`](super::gemm_bf16::available)).
unsafe fn pack_panels(b: &View, p0: usize, kp: usize, first: usize, out: &mut [MaybeUninit<u32>]) {
    if b.rs == 1 && b.cs != 1 {
        for (i, panel) in out.chunks_mut(kp * NR).enumerate() {
            // SAFETY: the caller's.
            unsafe { column_panel(b, p0, kp, first + i, panel) };
        }
        return;
    }
    for p in 0..kp {
        for (i, panel) in out.chunks_mut(kp * NR).enumerate() {
            // SAFETY: the caller's.
            unsafe { pair_lanes(b, 2 * (p0 + p), first + i, &mut panel[p * NR..][..NR]) };
        }
    }
}

/// Rows `r` and `r + 1` of panel `panel`'s columns as its `NR` lanes (zero beyond `b`).
///
/// # Safety
/// As [`pack_panels`].
unsafe fn pair_lanes(b: &View, r: usize, panel: usize, dst: &mut [MaybeUninit<u32>]) {
    let (k, n) = (b.rows, b.cols);
    let cols = panel * NR..(panel * NR + NR).min(n);
    if b.cs == 1 && cols.len() == NR && r + 1 < k {
        // Rows contiguous, a whole panel: two rows' 32 values make its lanes.
        // SAFETY: rows r and r + 1 hold n contiguous values, the panel's 32 among them.
        unsafe {
            let lo = line(b, r, b.rs, n)[cols.clone()].as_ptr();
            let hi = line(b, r + 1, b.rs, n)[cols].as_ptr();
            interleave_pairs(lo, hi, dst);
        }
        return;
    }
    for (lane_at, d) in dst.iter_mut().enumerate() {
        let j = cols.start + lane_at;
        // SAFETY: the caller's; `at` reads inside `b` only.
        d.write(unsafe { lane(at(b, r, j), at(b, r + 1, j)) });
    }
}

/// Panel `panel` of [`pack_right`] for a right operand whose columns are contiguous, into
/// `out` (`kp · NR` lanes, every one written).
///
/// # Safety
/// As [`pack_panels`].
unsafe fn column_panel(b: &View, p0: usize, kp: usize, panel: usize, out: &mut [MaybeUninit<u32>]) {
    let (k, n) = (b.rows, b.cols);
    let cols = panel * NR..(panel * NR + NR).min(n);
    if cols.len() == NR && 2 * (p0 + kp) <= k {
        // SAFETY: the panel's columns hold the block's pairs.
        unsafe { transposed_pairs(b, p0, kp, cols.start, out) };
        return;
    }
    // A pair's two values are neighbours in a column.
    for lane_at in 0..NR {
        let j = cols.start + lane_at;
        // SAFETY: column j, inside `b`, is a contiguous run of k values.
        let col: &[f32] = if j < n {
            unsafe { line(b, j, b.cs, k) }
        } else {
            &[]
        };
        for p in 0..kp {
            let r = 2 * (p0 + p);
            let x = col.get(r).copied().unwrap_or(0.0);
            let y = col.get(r + 1).copied().unwrap_or(0.0);
            out[p * NR + lane_at].write(lane(x, y));
        }
    }
}

/// A whole panel of a right operand whose columns are contiguous, from column `c0`, pairs
/// `p0 .. p0 + kp` (all inside `b`), as [`pack_right`] lays it out. Each column is read in
/// order, sixteen pairs at a time, and converted as a row of lanes; sixteen columns' rows,
/// transposed, are sixteen pairs' lanes.
///
/// # Safety
/// As [`pack_panels`]; columns `c0 .. c0 + NR` and rows `2 p0 .. 2 (p0 + kp)` are inside `b`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn transposed_pairs(
    b: &View,
    p0: usize,
    kp: usize,
    c0: usize,
    out: &mut [MaybeUninit<u32>],
) {
    use std::arch::x86_64::*;
    use std::mem::transmute;
    let values = |n: usize| ((1u32 << n.min(16)) - 1) as __mmask16;
    for q0 in (0..kp).step_by(16) {
        let pairs = 16.min(kp - q0);
        let (lo, hi) = (values(2 * pairs), values((2 * pairs).saturating_sub(16)));
        for half in 0..NR / 16 {
            let rows: [__m512i; 16] = std::array::from_fn(|t| {
                let column = (c0 + 16 * half + t) as isize * b.cs;
                // SAFETY: the column's `2 · pairs` values from row 2 (p0 + q0) are inside `b`;
                // the masked loads read those alone (the second one's address, past them when
                // `pairs` ≤ 8, is only computed); the CPU has the instructions.
                unsafe {
                    let from = b.ptr.offset(column + 2 * (p0 + q0) as isize);
                    let converted = _mm512_cvtne2ps_pbh(
                        _mm512_maskz_loadu_ps(hi, from.wrapping_add(16)),
                        _mm512_maskz_loadu_ps(lo, from),
                    );
                    transmute::<__m512bh, __m512i>(converted)
                }
            });
            let lanes = transpose_16(rows);
            for (q, v) in lanes.iter().take(pairs).enumerate() {
                // SAFETY: pair q0 + q's lanes 16 half .. 16 half + 16 are inside `out`.
                unsafe {
                    let at = (q0 + q) * NR + 16 * half;
                    _mm512_storeu_si512(out.as_mut_ptr().add(at).cast(), *v);
                }
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn transposed_pairs(_: &View, _: usize, _: usize, _: usize, _: &mut [MaybeUninit<u32>]) {
    unreachable!("the bf16 kernel runs on x86-64 only")
}

/// The 16 × 16 transpose of 32-bit lanes: lane `t` of result `i` is lane `i` of `rows[t]`.
/// Pairs of rows interleave 32-bit lanes, then 64-bit ones (result: in each 128-bit block, four
/// rows of one column), then whole 128-bit blocks trade places.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn transpose_16(rows: [std::arch::x86_64::__m512i; 16]) -> [std::arch::x86_64::__m512i; 16] {
    use std::arch::x86_64::*;
    let a: [__m512i; 16] = std::array::from_fn(|i| {
        let (x, y) = (rows[i & !1], rows[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_epi32(x, y)
        } else {
            _mm512_unpackhi_epi32(x, y)
        }
    });
    // b[4i + c]: in 128-bit block L, rows 4i .. 4i + 4 of column 4L + c.
    let b: [__m512i; 16] = std::array::from_fn(|j| {
        let (i, c) = (j / 4, j % 4);
        let (x, y) = (a[4 * i + c / 2], a[4 * i + 2 + c / 2]);
        if c % 2 == 0 {
            _mm512_unpacklo_epi64(x, y)
        } else {
            _mm512_unpackhi_epi64(x, y)
        }
    });
    let mut out = [_mm512_setzero_si512(); 16];
    for c in 0..4 {
        let s0 = _mm512_shuffle_i32x4::<0b01_00_01_00>(b[c], b[4 + c]);
        let s1 = _mm512_shuffle_i32x4::<0b11_10_11_10>(b[c], b[4 + c]);
        let s2 = _mm512_shuffle_i32x4::<0b01_00_01_00>(b[8 + c], b[12 + c]);
        let s3 = _mm512_shuffle_i32x4::<0b11_10_11_10>(b[8 + c], b[12 + c]);
        out[c] = _mm512_shuffle_i32x4::<0b10_00_10_00>(s0, s2);
        out[4 + c] = _mm512_shuffle_i32x4::<0b11_01_11_01>(s0, s2);
        out[8 + c] = _mm512_shuffle_i32x4::<0b10_00_10_00>(s1, s3);
        out[12 + c] = _mm512_shuffle_i32x4::<0b11_01_11_01>(s1, s3);
    }
    out
}

/// `lo[t]` and `hi[t]` rounded to bf16 as lane `t` of `dst`, for `t` in `0 .. NR`.
///
/// # Safety
/// `lo` and `hi` point at `NR` values; the CPU has AVX-512 F, BW and BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn interleave_pairs(lo: *const f32, hi: *const f32, dst: &mut [MaybeUninit<u32>]) {
    use std::arch::x86_64::*;
    for half in 0..NR / 16 {
        // SAFETY: 16 values from `16 half` are inside both runs and `dst`.
        unsafe {
            let v = to_pairs(
                _mm512_loadu_ps(lo.add(16 * half)),
                _mm512_loadu_ps(hi.add(16 * half)),
            );
            _mm512_storeu_si512(dst.as_mut_ptr().add(16 * half).cast(), v);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn interleave_pairs(_: *const f32, _: *const f32, _: &mut [MaybeUninit<u32>]) {
    unreachable!("the bf16 kernel runs on x86-64 only")
}

/// Sixteen lanes, lane `t` holding `lo[t]` and `hi[t]` rounded to bf16 (`lo` in the low half).
///
/// # Safety
/// The CPU has AVX-512 F, BW and BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn to_pairs(
    lo: std::arch::x86_64::__m512,
    hi: std::arch::x86_64::__m512,
) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    use std::mem::transmute;
    // The conversion puts lo's 16 values, then hi's; the permutation takes them in turns.
    // SAFETY: the same 512 bits, read as 16 lanes of 32.
    let both = unsafe { transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(hi, lo)) };
    let turns = _mm512_set_epi16(
        31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4,
        19, 3, 18, 2, 17, 1, 16, 0,
    );
    _mm512_permutexvar_epi16(turns, both)
}

/// How [`pack_left`] lays out a block of the left operand's lanes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Left {
    /// `[row][pair]`: row i's pairs at `i · kp` (a row-major operand converts a row at a time).
    RowMajor,
    /// `[pair][LANES]`: pair p's rows at `p · LANES` (a transposed operand converts a pair of
    /// its columns, rows side by side, at a time).
    PairMajor,
}

/// Lanes per pair in [`Left::PairMajor`]: one vector, of which the first [`MR`] are rows.
pub(super) const LANES: usize = 16;

impl Left {
    pub(super) fn of(a: &View) -> Self {
        if a.rs == 1 && a.cs != 1 {
            Left::PairMajor
        } else {
            Left::RowMajor
        }
    }
}

/// Row blocks of the left operand packed at once (a transposed operand's columns are read as
/// runs of this many blocks' rows).
pub(super) const GROUP: usize = 8;

/// `blocks` (at most [`GROUP`]) blocks of [`MR`] rows of the left operand from row `r0`, pairs
/// `p0 .. p0 + kp`, as lanes laid out as [`Left::of`] `a` says, each (a[i, 2p], a[i, 2p + 1]);
/// beyond `a` zero. Block `b` fills `out[b · kp · LANES ..][.. kp · LANES]`.
///
/// # Safety
/// `a` points at memory valid for its extent; the CPU runs the kernel
/// ([`available`](super::gemm_bf16::available)); `out` holds `blocks · kp · LANES` lanes; the
/// blocks start inside `a`.
pub(super) unsafe fn pack_left(
    a: &View,
    r0: usize,
    blocks: usize,
    p0: usize,
    kp: usize,
    out: &mut [u32],
) {
    if Left::of(a) == Left::PairMajor {
        // SAFETY: the caller's.
        unsafe { pairs_of_columns(a, r0, blocks, p0, kp, out) };
        return;
    }
    for (b, block) in out.chunks_mut(kp * LANES).take(blocks).enumerate() {
        // SAFETY: the caller's.
        unsafe { pack_rows(a, r0 + b * MR, p0, kp, block) };
    }
}

/// One block of [`MR`] rows from `r0` of a row-major (or strided) left operand as
/// [`Left::RowMajor`] lanes.
///
/// # Safety
/// As [`pack_left`], for one block.
unsafe fn pack_rows(a: &View, r0: usize, p0: usize, kp: usize, out: &mut [u32]) {
    let (m, k) = (a.rows, a.cols);
    let rows = MR.min(m - r0);
    // A tile reads MR rows of lanes: those past `a` are zero.
    out[rows * kp..MR * kp].fill(0);
    if a.cs == 1 {
        // Rows contiguous: a row's values in order are its pairs' lanes.
        for i in 0..rows {
            // SAFETY: row r0 + i holds k contiguous values.
            let row = unsafe { line(a, r0 + i, a.rs, k) };
            let from = (2 * p0).min(k);
            let to = (2 * (p0 + kp)).min(k);
            // SAFETY: `available()`, checked by `product`.
            unsafe { convert(&row[from..to], &mut out[i * kp..(i + 1) * kp]) };
        }
        return;
    }
    for i in 0..rows {
        for p in 0..kp {
            let c = 2 * (p0 + p);
            // SAFETY: the caller's.
            out[i * kp + p] = unsafe { lane(at(a, r0 + i, c), at(a, r0 + i, c + 1)) };
        }
    }
}

/// A transposed left operand's `blocks` blocks of [`MR`] rows from `r0`, pairs `p0 .. p0 + kp`,
/// as [`Left::PairMajor`] lanes: the two columns of a pair, each a run of a block's rows side
/// by side, make its [`LANES`] lanes (lane t: a[r0 + t, 2p], a[r0 + t, 2p + 1]); lanes past the
/// block's rows, and columns beyond `a`, are zero. The blocks of one pair are read in turn, so
/// that each column is read as one run of all the blocks' rows (a column of `xᵀ` is a row of
/// `x`, far from the next).
///
/// # Safety
/// `a` points at memory valid for its extent and its columns are contiguous; `out` holds
/// `blocks · kp · LANES` lanes; the CPU has AVX-512 F, BW and BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn pairs_of_columns(
    a: &View,
    r0: usize,
    blocks: usize,
    p0: usize,
    kp: usize,
    out: &mut [u32],
) {
    use std::arch::x86_64::*;
    let masks: [__mmask16; GROUP] = std::array::from_fn(|b| {
        let rows = MR.min(a.rows.saturating_sub(r0 + b * MR));
        ((1u32 << rows) - 1) as __mmask16
    });
    // SAFETY (each load): column c, inside `a`, holds the block's rows from its first; the
    // masked load reads those alone.
    let load = |c: usize, b: usize| {
        if c < a.cols {
            let first = (r0 + b * MR) as isize;
            unsafe { _mm512_maskz_loadu_ps(masks[b], a.ptr.offset(c as isize * a.cs + first)) }
        } else {
            _mm512_setzero_ps()
        }
    };
    for p in 0..kp {
        let c = 2 * (p0 + p);
        for b in 0..blocks {
            // SAFETY: the CPU has the instructions; `out` holds LANES lanes at block b, pair p.
            unsafe {
                let lanes = to_pairs(load(c, b), load(c + 1, b));
                let at = b * kp * LANES + p * LANES;
                _mm512_storeu_si512(out.as_mut_ptr().add(at).cast(), lanes);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn pairs_of_columns(_: &View, _: usize, _: usize, _: usize, _: usize, _: &mut [u32]) {
    unreachable!("the bf16 kernel runs on x86-64 only")
}

/// `src` rounded to bf16, in order, into `dst` as lanes of two (`dst[p]` holds `src[2p]` and
/// `src[2p + 1]`); `dst`'s lanes past `src` are zero.
///
/// # Safety
/// The CPU has AVX-512 F and BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn convert(src: &[f32], dst: &mut [u32]) {
    use std::arch::x86_64::*;
    use std::mem::transmute;
    let whole = src.len() / 32;
    for c in 0..whole {
        // SAFETY: 32 values from `32 c` are inside `src`, 16 lanes from `16 c` inside `dst`.
        unsafe {
            let lo = _mm512_loadu_ps(src.as_ptr().add(32 * c));
            let hi = _mm512_loadu_ps(src.as_ptr().add(32 * c + 16));
            let v: __m512i = transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(hi, lo));
            _mm512_storeu_si512(dst.as_mut_ptr().add(16 * c).cast(), v);
        }
    }
    let rest = &src[32 * whole..];
    for (p, d) in dst[16 * whole..].iter_mut().enumerate() {
        let x = rest.get(2 * p).copied().unwrap_or(0.0);
        let y = rest.get(2 * p + 1).copied().unwrap_or(0.0);
        *d = lane(x, y);
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn convert(_: &[f32], _: &mut [u32]) {
    unreachable!("the bf16 kernel runs on x86-64 only")
}
