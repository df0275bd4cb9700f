//! `trueneg bench`: the ELECTRA step of `torch_electra_bench.py` (generator + discriminator,
//! loss `L_G + 50·L_D`) runs through the training step, and its options are checked.

mod common;
use common::{bin, fails, ok};

/// The losses of the `step` lines of a bench's output.
fn losses(out: &str) -> Vec<f64> {
    out.lines()
        .filter(|l| l.starts_with("step") || l.starts_with("warmup"))
        .map(|l| {
            let v = l.split("loss=").nth(1).expect("loss=").split(' ').next();
            v.unwrap().parse().expect("a number")
        })
        .collect()
}

#[test]
fn electra_bench_runs_the_generator_and_discriminator_step() {
    let args = [
        "bench", "--layers", "1", "--batch", "2", "--steps", "3", "--warmup", "0",
    ];
    let out = ok(bin()
        .args(args)
        .args(["--model", "electra", "--hc"])
        .output()
        .unwrap());
    assert!(out.contains("model=Electra"), "{out}");
    assert!(out.contains("objective=hc"), "{out}");
    let l = losses(&out);
    assert_eq!(l.len(), 3, "{out}");
    // At initialisation L_G ≈ ln 30522 = 10.33 and L_D ≈ ln 2, so L ≈ 10.3 + 50 · 0.69 = 45;
    // BERT's MLM + SR step starts near 11.
    assert!((38.0..52.0).contains(&l[0]), "first ELECTRA loss {}", l[0]);
    let bert = losses(&ok(bin().args(args).output().unwrap()));
    assert!(
        (9.0..13.0).contains(&bert[0]),
        "first BERT loss {}",
        bert[0]
    );

    let err = fails(
        bin()
            .args(args)
            .args(["--hc", "--objective", "sr"])
            .output()
            .unwrap(),
    );
    assert!(err.contains("--objective"), "{err}");
}
