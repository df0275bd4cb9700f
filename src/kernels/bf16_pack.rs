//! The operands of the bf16 matrix product (`kernels::gemm_bf16`) rounded to bf16 (round to
//! nearest even) and packed as lanes of pairs of the inner dimension.
//!
//! The packed right operand holds, for each pair of rows (2p, 2p+1) and each column j, the two
//! values side by side in one 32-bit lane, in panels of [`NR`] columns; the left operand's
//! lanes (a[i, 2p], a[i, 2p+1]) are packed row by row where it is row-major, pair by pair where
//! it is transposed (the weight gradients `xᵀ·G`: a pair of its columns holds the lanes of 16
//! rows side by side), so that both pack with whole-vector conversions. A right operand with
//! contiguous columns (`x·Eᵀ`) gathers each column's pair as one 64-bit element. Beyond an
//! operand, and for an odd inner dimension, the lanes are zero. (The vector conversion,
//! `vcvtne2ps2bf16`, takes a subnormal value as zero; the scalar one, on the edges, keeps it.)

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
/// `b` points at memory valid for its extent; the CPU runs the kernel ([`available`]).
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
    // SAFETY (each call): the caller's; each panel writes its own chunk, every lane of it.
    let one = |(panel, chunk): (usize, &mut [MaybeUninit<u32>])| unsafe {
        pack_panel(b, p0, kp, panel, chunk)
    };
    if threads > 1 {
        use rayon::prelude::*;
        lanes.par_chunks_mut(kp * NR).enumerate().for_each(one);
    } else {
        lanes.chunks_mut(kp * NR).enumerate().for_each(one);
    }
    // SAFETY: the panels wrote all `len` lanes.
    unsafe { out.set_len(len) };
}

/// Panel `panel` of [`pack_right`] into `out` (`kp · NR` lanes, every one written).
///
/// # Safety
/// `b` points at memory valid for its extent; the CPU runs the kernel ([`available`]).
unsafe fn pack_panel(b: &View, p0: usize, kp: usize, panel: usize, out: &mut [MaybeUninit<u32>]) {
    let (k, n) = (b.rows, b.cols);
    let cols = panel * NR..(panel * NR + NR).min(n);
    let full = cols.len() == NR;
    if b.rs == 1 && b.cs != 1 {
        if full && 2 * (p0 + kp) <= k && gathers_reach(b.cs) {
            // SAFETY: the panel's columns hold the block's pairs; the offsets reach them.
            unsafe { gather_pairs(b, p0, kp, cols.start, out) };
            return;
        }
        // Columns contiguous: a pair's two values are neighbours in a column.
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
        return;
    }
    for p in 0..kp {
        let dst = &mut out[p * NR..][..NR];
        let r = 2 * (p0 + p);
        if b.cs == 1 && full && r + 1 < k {
            // Rows contiguous, a whole panel: two rows' 32 values make its lanes.
            // SAFETY: rows r and r + 1 hold n contiguous values, the panel's 32 among them.
            unsafe {
                let lo = line(b, r, b.rs, n)[cols.clone()].as_ptr();
                let hi = line(b, r + 1, b.rs, n)[cols.clone()].as_ptr();
                interleave_pairs(lo, hi, dst);
            }
            continue;
        }
        for (lane_at, d) in dst.iter_mut().enumerate() {
            let j = cols.start + lane_at;
            // SAFETY: the caller's; `at` reads inside `b` only.
            d.write(unsafe { lane(at(b, r, j), at(b, r + 1, j)) });
        }
    }
}

/// Whether [`gather_pairs`]'s offsets (up to `(NR - 1) · cs` values) fit its 32-bit byte
/// offsets.
fn gathers_reach(cs: isize) -> bool {
    cs > 0 && ((NR - 1) as isize).saturating_mul(cs).saturating_mul(4) <= i32::MAX as isize
}

/// A whole panel of a right operand whose columns are contiguous, from column `c0`, pairs
/// `p0 .. p0 + kp` (all inside `b`), as [`pack_panel`] lays it out: for each pair, each column's
/// two neighbouring values are gathered as one 64-bit element, eight columns per gather; the
/// conversion of two gathers' sixteen values, in order, is the pairs of sixteen columns.
///
/// # Safety
/// As [`pack_panel`]; columns `c0 .. c0 + NR` and rows `2 p0 .. 2 (p0 + kp)` are inside `b`;
/// [`gathers_reach`] `b.cs`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn gather_pairs(b: &View, p0: usize, kp: usize, c0: usize, out: &mut [MaybeUninit<u32>]) {
    use std::arch::x86_64::*;
    use std::mem::transmute;
    // Offsets in values of eight columns from the panel's first: t · cs, then 8 + t, ...
    let offsets: [__m256i; NR / 8] = std::array::from_fn(|g| {
        let at = |t: usize| ((8 * g + t) as isize * b.cs) as i32;
        _mm256_setr_epi32(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7))
    });
    for p in 0..kp {
        let r = 2 * (p0 + p);
        // SAFETY: element (r, c0) is inside `b`; every gathered pair is (r, j), (r + 1, j) of a
        // panel column j, inside `b`.
        unsafe {
            let first = b.ptr.offset(r as isize + c0 as isize * b.cs);
            let gather =
                |g: usize| _mm512_castpd_ps(_mm512_i32gather_pd::<4>(offsets[g], first.cast()));
            for half in 0..NR / 16 {
                let v = _mm512_cvtne2ps_pbh(gather(2 * half + 1), gather(2 * half));
                _mm512_storeu_si512(
                    out.as_mut_ptr().add(p * NR + 16 * half).cast(),
                    transmute::<__m512bh, __m512i>(v),
                );
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn gather_pairs(_: &View, _: usize, _: usize, _: usize, _: &mut [MaybeUninit<u32>]) {
    unreachable!("the bf16 kernel runs on x86-64 only")
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

/// Rows `r0 .. r0 + MR` of the left operand, pairs `p0 .. p0 + kp`, as lanes laid out as
/// [`Left::of`] `a` says, each (a[i, 2p], a[i, 2p + 1]); beyond `a` zero.
///
/// # Safety
/// `a` points at memory valid for its extent; the CPU runs the kernel ([`available`]); `out`
/// holds `kp · LANES` lanes.
pub(super) unsafe fn pack_left(a: &View, r0: usize, p0: usize, kp: usize, out: &mut [u32]) {
    let (m, k) = (a.rows, a.cols);
    let rows = MR.min(m - r0);
    if Left::of(a) == Left::PairMajor {
        // SAFETY: the caller's.
        unsafe { pairs_of_columns(a, r0, rows, p0, kp, out) };
        return;
    }
    if rows < MR {
        out.fill(0);
    }
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

/// A transposed left operand's rows `r0 .. r0 + rows` (`rows` ≤ [`MR`]), pairs `p0 .. p0 + kp`,
/// as [`Left::PairMajor`] lanes: the two columns of a pair, each a run of `rows` values side
/// by side, make its [`LANES`] lanes (lane t: a[r0 + t, 2p], a[r0 + t, 2p + 1]); lanes from
/// `rows` on, and columns beyond `a`, are zero.
///
/// # Safety
/// `a` points at memory valid for its extent and its columns are contiguous; `out` holds
/// `kp · LANES` lanes; the CPU has AVX-512 F, BW and BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn pairs_of_columns(
    a: &View,
    r0: usize,
    rows: usize,
    p0: usize,
    kp: usize,
    out: &mut [u32],
) {
    use std::arch::x86_64::*;
    let mask: __mmask16 = ((1u32 << rows) - 1) as __mmask16;
    // SAFETY (each load): column c, inside `a`, holds `rows` values from row r0; the masked
    // load reads those alone.
    let load = |c: usize| {
        if c < a.cols {
            unsafe { _mm512_maskz_loadu_ps(mask, a.ptr.offset(c as isize * a.cs + r0 as isize)) }
        } else {
            _mm512_setzero_ps()
        }
    };
    for p in 0..kp {
        let c = 2 * (p0 + p);
        // SAFETY: the CPU has the instructions; `out` holds LANES lanes at p.
        unsafe {
            let lanes = to_pairs(load(c), load(c + 1));
            _mm512_storeu_si512(out.as_mut_ptr().add(p * LANES).cast(), lanes);
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
