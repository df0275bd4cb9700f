//! The per-call seeds of the host's random draws (masks, sampled tokens): one process-wide
//! ChaCha8 generator that [`seed`] resets, each call taking the next word as its own seed. The
//! pre-training loop reseeds it with the device at every step, so a resumed run draws the same
//! values, and a draw never depends on the thread count (each kernel splits its own stream).

use std::sync::Mutex;

use burn::prelude::*;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

static CALL_SEEDS: Mutex<Option<ChaCha8Rng>> = Mutex::new(None);

/// Seeds every random draw of the models: burn's device RNG and the host kernels' per-call
/// seeds.
pub fn seed(device: &Device, seed: u64) {
    device.seed(seed);
    *CALL_SEEDS.lock().expect("call seed lock") = Some(ChaCha8Rng::seed_from_u64(seed));
}

/// The seed of the next random draw (each call advances the process-wide generator).
pub(crate) fn next_call() -> u64 {
    CALL_SEEDS
        .lock()
        .expect("call seed lock")
        .get_or_insert_with(|| ChaCha8Rng::seed_from_u64(0))
        .next_u64()
}
