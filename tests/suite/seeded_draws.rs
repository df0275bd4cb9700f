//! A run's random masks and samples depend on its seeds alone, not on what other threads of
//! the process seed or draw meanwhile: runs side by side in one process (this suite's tests, a
//! library caller's threads) each get the values they would get alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use burn::prelude::*;
use trueneg::kernels::dropout::dropout;

/// What a run seeded `seed` draws first: a few dropout masks and token samples (the host
/// kernels' per-call seeds).
fn draws(seed: u64) -> (Vec<Vec<f32>>, Vec<Vec<i64>>) {
    let device = Device::flex().autodiff();
    trueneg::model::seed(&device, seed);
    let d = burn::nn::DropoutConfig::new(0.5).init();
    let mut masks = Vec::new();
    let mut samples = Vec::new();
    for _ in 0..8 {
        let x = Tensor::<2>::ones([32, 32], &device);
        masks.push(dropout(&d, x).into_data().try_into_vec().unwrap());
        let logits = Tensor::<2>::zeros([16, 50], &device);
        let ids = trueneg::kernels::sampling::sample(&logits);
        samples.push(ids.into_data().convert::<i64>().try_into_vec().unwrap());
    }
    (masks, samples)
}

#[test]
fn a_runs_draws_do_not_depend_on_other_threads_seeding_and_drawing() {
    let alone = draws(7);
    assert_ne!(alone, draws(8), "another seed, other draws");
    assert_eq!(alone, draws(7), "the same seed, the same draws");
    let stop = Arc::new(AtomicBool::new(false));
    let others: Vec<_> = (0..3u64)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    draws(100 + i);
                }
            })
        })
        .collect();
    let beside: Vec<_> = (0..20).map(|_| draws(7)).collect();
    stop.store(true, Ordering::Relaxed);
    for t in others {
        t.join().unwrap();
    }
    for (i, b) in beside.iter().enumerate() {
        assert!(b.0 == alone.0, "run {i}: other dropout masks");
        assert!(b.1 == alone.1, "run {i}: other samples");
    }
}
