//! Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC 2011), the counter-based generator that
//! cuRAND and PyTorch draw their masks from: word `i` of a stream is a pure function of the
//! key, the stream and `i`, so any chunk of a mask is drawn without the words before it, and
//! sixteen blocks at once are plain lane-wise arithmetic that the compiler vectorises (32-bit
//! products, exclusive ors). The known answers of the reference implementation are checked in
//! `tests/suite/kernels.rs`.

/// The round multipliers.
const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
/// The key's increments between rounds (the golden ratio's and √3 − 1's bits).
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;
const ROUNDS: usize = 10;

/// Blocks computed side by side in [`words`].
pub const LANES: usize = 16;
/// Words of one call of [`words`]: four per block.
pub const BATCH: usize = 4 * LANES;

/// [`BATCH`] words of stream `stream` under `key`, from the [`LANES`] blocks that start at
/// `first_block`: block `b` has counter `[b, b >> 32, stream, stream >> 32]` (low halves
/// first), and word `i` of the batch is word `i / LANES` of block `first_block + i % LANES`
/// (the blocks' first words, then their second words, …, so that no lanes are shuffled). Key
/// and counter halves are Random123's: its known answers are lane 0's four words.
#[inline(always)]
pub fn words(key: u64, stream: u64, first_block: u64) -> [u32; BATCH] {
    // Each word in the low half of a u64 lane: the products are then one widening multiply
    // of 32-bit halves per lane (`vpmuludq`), with no unpacking of 32-bit lanes.
    const LOW: u64 = 0xFFFF_FFFF;
    let mut c0 = [0u64; LANES];
    let mut c1 = [0u64; LANES];
    for (l, (lo, hi)) in c0.iter_mut().zip(&mut c1).enumerate() {
        let b = first_block.wrapping_add(l as u64);
        (*lo, *hi) = (b & LOW, b >> 32);
    }
    let mut c2 = [stream & LOW; LANES];
    let mut c3 = [stream >> 32; LANES];
    let (mut k0, mut k1) = (key & LOW, key >> 32);
    for round in 0..ROUNDS {
        if round > 0 {
            k0 = (k0 + u64::from(W0)) & LOW;
            k1 = (k1 + u64::from(W1)) & LOW;
        }
        for l in 0..LANES {
            let p0 = u64::from(M0) * (c0[l] & LOW);
            let p1 = u64::from(M1) * (c2[l] & LOW);
            [c0[l], c1[l], c2[l], c3[l]] = [
                (p1 >> 32) ^ c1[l] ^ k0,
                p1 & LOW,
                (p0 >> 32) ^ c3[l] ^ k1,
                p0 & LOW,
            ];
        }
    }
    let mut out = [0u32; BATCH];
    for (w, c) in out.chunks_exact_mut(LANES).zip([c0, c1, c2, c3]) {
        for (o, v) in w.iter_mut().zip(c) {
            *o = v as u32;
        }
    }
    out
}
