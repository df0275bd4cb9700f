//! The CPU fast paths of the encoder: GELU (value and gradient against an f64 reference) and
//! dropout masks (rate, scale, determinism).

use burn::prelude::*;
use trueneg::kernels::gelu::forward as gelu_host;
use trueneg::model::activation::gelu;
use trueneg::model::dropout::{dropout, mask_values};

fn reference(x: f64) -> (f64, f64) {
    let cdf = 0.5 * (1.0 + libm::erf(x / std::f64::consts::SQRT_2));
    let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    (x * cdf, cdf + x * pdf)
}

#[test]
fn gelu_value_and_derivative_match_the_erf_form() {
    // Dense grid over the range that matters plus the tails.
    let xs: Vec<f32> = (-4000..=4000)
        .map(|i| i as f32 * 0.0025)
        .chain([-30.0, -12.0, -9.5, 9.5, 12.0, 30.0, 1e-6, -1e-6, 0.0])
        .collect();
    let (y, d) = gelu_host(&xs, true);
    let (mut worst_y, mut worst_d) = (0f64, 0f64);
    for ((&x, &y), &d) in xs.iter().zip(&y).zip(&d) {
        let (ry, rd) = reference(x as f64);
        worst_y = worst_y.max((y as f64 - ry).abs() / (1.0 + ry.abs()));
        worst_d = worst_d.max((d as f64 - rd).abs());
    }
    assert!(worst_y < 5e-7, "gelu error {worst_y}");
    assert!(worst_d < 1e-6, "gelu' error {worst_d}");
    // Without the derivative: the same values.
    let (y2, d2) = gelu_host(&xs, false);
    assert_eq!(y, y2);
    assert!(d2.is_empty());
}

#[test]
fn gelu_gradient_flows_through_the_graph() {
    let device = Device::flex().autodiff();
    let xs = vec![-3.0f32, -1.0, -0.25, 0.0, 0.5, 2.0];
    let x = Tensor::<1>::from_data(TensorData::new(xs.clone(), [6]), &device).require_grad();
    // Weighted sum so that each element's gradient is scaled differently.
    let w = Tensor::<1>::from_data(
        TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [6]),
        &device,
    );
    let out = gelu(x.clone());
    let values: Vec<f32> = out.clone().into_data().try_into_vec().unwrap();
    let loss = (out * w).sum();
    let g: Vec<f32> = x
        .grad(&loss.backward())
        .unwrap()
        .into_data()
        .try_into_vec()
        .unwrap();
    for (i, &x) in xs.iter().enumerate() {
        let (ry, rd) = reference(x as f64);
        assert!((values[i] as f64 - ry).abs() < 1e-6, "value at {x}");
        let want = rd * (i + 1) as f64;
        assert!(
            (g[i] as f64 - want).abs() < 1e-5,
            "grad at {x}: {} vs {want}",
            g[i]
        );
    }
    // Without autodiff (inference), the same values.
    let plain = gelu(Tensor::<1>::from_data(
        TensorData::new(xs.clone(), [6]),
        &Device::flex(),
    ));
    let plain: Vec<f32> = plain.into_data().try_into_vec().unwrap();
    assert_eq!(plain, values);
}

#[test]
fn dropout_masks_have_the_rate_and_scale_and_repeat_with_the_seed() {
    let n = 1 << 20;
    let m = mask_values(n, 0.1, 42);
    let dropped = m.iter().filter(|&&v| v == 0.0).count() as f64 / n as f64;
    // 3 σ of a binomial(2²⁰, 0.1) share is 0.0009.
    assert!((dropped - 0.1).abs() < 0.001, "dropped {dropped}");
    let scale = 1.0f32 / 0.9;
    assert!(m.iter().all(|&v| v == 0.0 || v == scale));
    assert_eq!(m, mask_values(n, 0.1, 42));
    assert_ne!(m, mask_values(n, 0.1, 43));
    // Chunks are independent streams: the second half is not a copy of the first.
    assert_ne!(m[..n / 2], m[n / 2..]);
}

#[test]
fn dropout_is_identity_in_evaluation_and_reseeded_by_seed() {
    let cfg = burn::nn::DropoutConfig::new(0.5);
    let d = cfg.init();
    let plain = Device::flex();
    let x = Tensor::<2>::ones([64, 64], &plain);
    let same: Vec<f32> = dropout(&d, x).into_data().try_into_vec().unwrap();
    assert!(
        same.iter().all(|&v| v == 1.0),
        "no dropout without autodiff"
    );

    let device = Device::flex().autodiff();
    let draw = || -> Vec<f32> {
        dropout(&d, Tensor::<2>::ones([64, 64], &device))
            .into_data()
            .try_into_vec()
            .unwrap()
    };
    trueneg::model::seed(&device, 7);
    let a = draw();
    let b = draw();
    trueneg::model::seed(&device, 7);
    let c = draw();
    assert_eq!(a, c, "the same seed gives the same masks");
    assert_ne!(a, b, "consecutive calls draw new masks");
    let kept = a.iter().filter(|&&v| v == 2.0).count();
    assert!(kept > 1800 && kept < 2300, "kept {kept} of 4096 at p = 0.5");
}
