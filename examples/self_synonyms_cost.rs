//! The cost of building the self synonym table (`text::self_synonyms`) at ELECTRA-Small's
//! vocabulary: a 30,522 × 128 embedding matrix of random values, the whole-word rows of BERT's
//! uncased vocabulary as candidates (`--candidates N`, default 21,000), k = 10, on the device
//! named by `--device` (default cpu). Prints seconds per build (best of 3, after one untimed).
//!
//!     cargo run --release --example self_synonyms_cost -- [--device cpu] [--candidates N]

use std::collections::BTreeSet;
use std::time::Instant;

use burn::prelude::*;
use trueneg::text::self_synonyms::SelfSynonyms;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn main() {
    let device = trueneg::device::device_for(&arg("--device", "cpu")).expect("a device");
    let n: usize = arg("--candidates", "21000").parse().expect("a count");
    let (vocab, dim) = (30522, 128);
    let emb = Tensor::<2>::random(
        [vocab, dim],
        burn::tensor::Distribution::Normal(0.0, 0.02),
        &device,
    );
    let candidates: Vec<u32> = (1000..1000 + n as u32).collect();
    let build = SelfSynonyms {
        k: 10,
        threshold: 0.0,
        stop_words: BTreeSet::new(),
    };
    build.pairs(emb.clone(), &candidates);
    let best = (0..3)
        .map(|_| {
            let start = Instant::now();
            let pairs = build.pairs(emb.clone(), &candidates);
            assert_eq!(pairs.len(), n * 10);
            start.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min);
    println!(
        "self table: {n} candidates of {vocab} × {dim}, k = 10: {best:.2} s per build on {} thread(s)",
        rayon::current_num_threads()
    );
}
