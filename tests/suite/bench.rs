//! `trueneg bench`: the ELECTRA step of `torch_electra_bench.py` (generator + discriminator,
//! loss `L_G + 50·L_D`) runs through the training step, and its options are checked.

use crate::common;
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

/// A printed `key=value` number.
fn printed(out: &str, key: &str) -> f64 {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {out}"));
    line.trim().parse().unwrap()
}

/// The bench reports its efficiency: the step's GFLOP as the shapes give it (here BERT with 1
/// layer, batch 2 × 128, written out independently), the rate at the median step, the
/// device's product rate and the CPU's name, and where the step's threads spent its time.
/// `--precision auto` is resolved before the step and its efficiency line are built.
#[test]
fn bench_reports_the_steps_work_and_the_machines_product_rate() {
    let out = ok(bin()
        .args(["bench", "--layers", "1", "--batch", "2", "--steps", "2"])
        .args(["--warmup", "0", "--precision", "auto"])
        .output()
        .unwrap());
    assert!(
        out.contains("precision=F32 ") || out.contains("precision=Bf16 "),
        "{out}"
    );
    // Per token: Q, K, V, output (4·2·256²), FFN (2·2·256·1024), attention (2·2·128·256);
    // per masked position (19 per sequence): dense 2·256² and decoder 2·256·30522; ×3.
    let tokens = 2.0 * 128.0;
    let layer = 4.0 * 2.0 * 256.0 * 256.0 + 4.0 * 256.0 * 1024.0 + 4.0 * 128.0 * 256.0;
    let head = 2.0 * 256.0 * 256.0 + 2.0 * 256.0 * 30522.0;
    let want = 3.0 * (tokens * layer + 2.0 * 19.0 * head) / 1e9;
    let gflop = printed(&out, "gflop_per_step");
    assert!((gflop - want).abs() < 1e-3, "{gflop} vs {want}");
    let ms = printed(&out, "ms_per_step");
    let rate = printed(&out, "gflop_per_s");
    assert!((rate - gflop / (ms / 1e3)).abs() / rate < 0.01, "{out}");
    let matmul = printed(&out, "matmul_gflop_per_s");
    assert!(matmul > 0.0, "{out}");
    let efficiency = printed(&out, "efficiency");
    assert!(efficiency.is_finite() && efficiency > 0.0, "{out}");
    assert!(
        out.contains("GFLOP per step") && out.contains(" on "),
        "{out}"
    );
    // Each phase's products' rate: a third of the work forward, two thirds backward, in the
    // phases' mean times as the summary line prints them.
    let phase = |name: &str| -> f64 {
        let line = out
            .lines()
            .find(|l| l.starts_with("# sr: mean ms"))
            .expect("phases");
        let at = line.find(name).unwrap() + name.len() + 1;
        line[at..]
            .split([',', ' '])
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (forward_ms, backward_ms) = (phase("forward+loss"), phase("backward"));
    let forward = printed(&out, "forward_gflop_per_s");
    let backward = printed(&out, "backward_gflop_per_s");
    assert!(
        (forward * forward_ms / 1e3 - gflop / 3.0).abs() < 0.01 * gflop,
        "{out}"
    );
    assert!(
        (backward * backward_ms / 1e3 - 2.0 * gflop / 3.0).abs() < 0.01 * gflop,
        "{out}"
    );
    // Linux's scheduler statistics: the step's threads' time split three ways (each share's
    // median over the steps).
    if cfg!(target_os = "linux") {
        let shares =
            ["threads_on_cpu", "threads_waiting", "threads_idle"].map(|k| printed(&out, k));
        assert!(shares.iter().all(|s| (0.0..=1.5).contains(s)), "{out}");
        assert!(shares[0] > 0.0, "{out}");
    }
}

/// A stretch's threads' time splits into on a CPU, runnable and waiting, and idle, each over
/// the stretch's wall time times its threads; what the process's other threads add past the
/// capacity leaves no idle rather than a negative one.
#[test]
fn occupancy_splits_the_threads_time_into_on_cpu_waiting_and_idle() {
    use trueneg::bench::occupancy::Occupancy;
    // 100 ms on 2 threads: 150 ms on a CPU, 10 ms runnable, 40 ms asleep.
    let o = Occupancy::of(200e6, 150_000_000, 10_000_000);
    assert!((o.on_cpu - 0.75).abs() < 1e-12, "{o:?}");
    assert!((o.waiting - 0.05).abs() < 1e-12, "{o:?}");
    assert!((o.idle - 0.20).abs() < 1e-12, "{o:?}");
    let full = Occupancy::of(200e6, 205_000_000, 1_000_000);
    assert_eq!(full.idle, 0.0, "{full:?}");
    // Each share's median over the stretches, apart.
    let m = Occupancy::median(&[o, full, Occupancy::of(200e6, 100_000_000, 0)]).unwrap();
    assert!(
        (m.on_cpu - 0.75).abs() < 1e-12 && (m.idle - 0.2).abs() < 1e-12,
        "{m:?}"
    );
    assert!(Occupancy::median(&[]).is_none());
}

/// The efficiency sets each step's rate against the product rate timed beside it: a machine
/// whose speed halves midway (steps twice as long, products half as fast) keeps the ratio,
/// where the median step against the best product rate would not.
#[test]
fn efficiency_pairs_each_step_with_the_product_rate_timed_beside_it() {
    use trueneg::bench::efficiency::paired_efficiency;
    // 50 GFLOP a step: 500 ms at 100 GFLOP/s of products, then 1000 ms at 50: 100 % each.
    let (step_ms, probes) = (
        [500.0, 500.0, 1000.0, 1000.0, 1000.0],
        [100.0, 100.0, 50.0, 50.0, 50.0],
    );
    let e = paired_efficiency(50.0, &step_ms, &probes).unwrap();
    assert!((e - 1.0).abs() < 1e-12, "{e}");
    // Unpaired, the median step (1000 ms: 50 GFLOP/s) over the best probe (100) says 50 %.
    // Odd steps: the median is the middle ratio (0.8, 0.9, 1.0 → 0.9).
    let e = paired_efficiency(9.0, &[100.0, 100.0, 100.0], &[90.0, 112.5, 100.0]).unwrap();
    assert!((e - 0.9).abs() < 1e-12, "{e}");
    assert_eq!(paired_efficiency(9.0, &[], &[]), None);
}

/// `--trial` runs the objective twice from the same weights, batch and masks, step by step in
/// turn, each first on every other step: with nothing reading `kernels::trial::on()`, the two
/// compute the same losses, and the second is reported beside the first.
#[test]
fn bench_trial_runs_the_objective_twice_in_turn_on_the_same_values() {
    let args = [
        "bench", "--layers", "1", "--batch", "2", "--steps", "3", "--warmup", "0",
    ];
    let out = ok(bin().args(args).arg("--trial").output().unwrap());
    // `step N name loss=… ms=…`, in the order the runners took the step.
    let steps: Vec<(usize, &str, &str)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("step"))
        .map(|l| {
            let mut words = l.split_whitespace();
            let step = words.next().unwrap().parse().unwrap();
            let name = words.next().unwrap();
            (step, name, words.next().unwrap())
        })
        .collect();
    assert_eq!(steps.len(), 6, "{out}");
    for (i, pair) in steps.chunks(2).enumerate() {
        assert_eq!((pair[0].0, pair[1].0), (i, i), "{out}");
        let first = if i % 2 == 0 { "sr" } else { "sr+trial" };
        assert_eq!(pair[0].1, first, "step {i} runs {first} first: {out}");
        assert_eq!(pair[0].2, pair[1].2, "step {i}'s losses: {out}");
    }
    assert!(out.contains("ms_per_step[sr+trial]="), "{out}");
    assert!(out.contains("paired_ratio="), "{out}");

    let err = fails(
        bin()
            .args(args)
            .args(["--trial", "--objective", "sr,hc"])
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("--trial") && err.contains("--objective"),
        "{err}"
    );
}
