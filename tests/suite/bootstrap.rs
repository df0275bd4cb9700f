//! The bootstrap intervals on cases whose answer is known.

use trueneg::experiments::bootstrap::{bootstrap_grid, paired_difference, quantile};

#[test]
fn quantiles_interpolate_between_order_statistics() {
    let v = [1.0, 2.0, 3.0, 4.0, 5.0];
    assert_eq!(quantile(&v, 0.0), 1.0);
    assert_eq!(quantile(&v, 1.0), 5.0);
    assert_eq!(quantile(&v, 0.5), 3.0);
    assert!(
        (quantile(&v, 0.1) - 1.4).abs() < 1e-12,
        "numpy's linear rule: 1 + 0.4·(2 − 1)"
    );
    assert!((quantile(&v, 0.975) - 4.9).abs() < 1e-12);
}

#[test]
fn constant_scores_give_a_point_and_identical_arms_a_zero_difference() {
    let grid = vec![vec![80.0, 80.0], vec![80.0, 80.0], vec![80.0, 80.0]];
    let i = bootstrap_grid(&grid, 500, 0.95, 1);
    assert_eq!((i.mean, i.low, i.high), (80.0, 80.0, 80.0));
    let d = paired_difference(&grid, &grid, 500, 0.95, 1);
    assert_eq!((d.mean, d.low, d.high), (0.0, 0.0, 0.0));
    assert!(d.contains_zero());
}

#[test]
fn the_interval_matches_the_normal_approximation_and_is_reproducible() {
    // 400 values spread evenly on [0, 1]: mean 0.5, sd ≈ 0.2894; the 95 % interval of the mean
    // is ≈ 0.5 ± 1.96 · 0.2894 / 20 = 0.5 ± 0.02836.
    let values: Vec<f64> = (0..400).map(|i| i as f64 / 399.0).collect();
    let grid = vec![values];
    let i = bootstrap_grid(&grid, 4000, 0.95, 7);
    assert!((i.mean - 0.5).abs() < 1e-12);
    let half = (i.high - i.low) / 2.0;
    assert!((half - 0.02836).abs() < 0.003, "half-width {half}");
    assert!(i.low < 0.5 && 0.5 < i.high);
    assert_eq!(
        i,
        bootstrap_grid(&grid, 4000, 0.95, 7),
        "same seed, same interval"
    );
    assert_ne!(i, bootstrap_grid(&grid, 4000, 0.95, 8));
}

#[test]
fn paired_differences_keep_the_pairing_and_both_seed_levels_add_width() {
    // The method is better by exactly 2 on every seed, while seeds vary a lot: pairing removes
    // the seed variance, so the interval is the point 2 and does not contain 0.
    let base = vec![vec![60.0, 70.0], vec![80.0, 90.0], vec![65.0, 75.0]];
    let method: Vec<Vec<f64>> = base
        .iter()
        .map(|r| r.iter().map(|x| x + 2.0).collect())
        .collect();
    let d = paired_difference(&method, &base, 1000, 0.95, 3);
    assert_eq!((d.low, d.high), (2.0, 2.0));
    assert!(!d.contains_zero());
    // Unpaired, the same scores give a wide interval around the grand mean.
    let m = bootstrap_grid(&method, 1000, 0.95, 3);
    assert!(m.high - m.low > 10.0, "{m:?}");
    // Between-row variance only: rows [0, 0] and [10, 10]. The two-level bootstrap draws the
    // same row twice with probability 1/2 (means 0 or 10), so its 95 % interval is [0, 10].
    let rows = vec![vec![0.0, 0.0], vec![10.0, 10.0]];
    let r = bootstrap_grid(&rows, 2000, 0.95, 5);
    assert_eq!((r.low, r.high), (0.0, 10.0));
}

#[test]
fn one_seed_on_a_side_gives_no_verdict_and_repeated_seeds_are_refused() {
    use trueneg::experiments::bootstrap::{Interval, check_seeds, verdict};
    let interval = |low, high| Interval {
        mean: (low + high) / 2.0,
        low,
        high,
        level: 0.95,
    };
    let (above, around) = (interval(0.5, 2.0), interval(-0.5, 2.0));
    assert_eq!(verdict(&above, 2, 2, "higher", "lower"), "higher");
    assert!(verdict(&around, 3, 2, "higher", "lower").starts_with("contains 0"));
    for (p, f) in [(1, 5), (5, 1), (1, 1)] {
        let v = verdict(&above, p, f, "higher", "lower");
        assert!(v.starts_with("not enough seeds for an interval"), "{v}");
    }
    check_seeds("--seeds", &[1, 2, 3]).unwrap();
    let e = check_seeds("--seeds", &[1, 2, 1]).unwrap_err().to_string();
    assert!(
        e.contains("--seeds") && e.contains("seed 1 is given twice"),
        "{e}"
    );
    assert!(check_seeds("--seeds", &[]).is_err());
}
