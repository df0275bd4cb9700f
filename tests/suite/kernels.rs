//! The CPU fast paths of the encoder: GELU (value and gradient against an f64 reference),
//! dropout masks (rate, scale, determinism), the generator's sampler (its draws against the
//! softmax), and the fused kernels against burn's composed operations.

use burn::prelude::*;
use trueneg::kernels::dropout::{dropout, mask_values};
use trueneg::kernels::gelu;
use trueneg::kernels::gelu::forward as gelu_host;

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

// The fused kernels against burn's composed operations: values and gradients.

use trueneg::kernels::dropout::fill_mask;
use trueneg::kernels::{self, DropMask, Products};

use crate::common;
use common::{assert_close, leaf, on_threads, random, vec_of};

/// softmax(Q Kᵀ / √d + bias) ⊙ mask, times V, per head, from burn's own operations.
fn composed_attention(
    q: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    bias: Tensor<2>,
    heads: usize,
    mask: Option<Tensor<4>>,
) -> Tensor<3> {
    let [b, l, h] = q.dims();
    let dh = h / heads;
    let split = |t: Tensor<3>| t.reshape([b, l, heads, dh]).swap_dims(1, 2);
    let scores = split(q)
        .matmul(split(k).swap_dims(2, 3))
        .div_scalar((dh as f64).sqrt())
        + bias.reshape([b, 1, 1, l]);
    let mut probs = burn::tensor::activation::softmax(scores, 3);
    if let Some(m) = mask {
        probs = probs * m;
    }
    probs.matmul(split(v)).swap_dims(1, 2).reshape([b, l, h])
}

/// Key bias [b, l]: the last sequence has two padded keys.
fn padded_bias(b: usize, l: usize, device: &Device) -> Tensor<2> {
    let mut bias = vec![0f32; b * l];
    bias[b * l - 2..].fill(f32::MIN);
    Tensor::<2>::from_data(TensorData::new(bias, [b, l]), device)
}

/// Value, then the gradients of Σ w ⊙ out with respect to every input, for one implementation.
/// The context and the gradients of Q, K and V: our kernel with its products multiplied as
/// `products` says (`Some`), or burn's composed operations in f32 (`None`).
fn attention_case(fused: Option<Products>, dropout: Option<DropMask>) -> Vec<Vec<f32>> {
    let device = Device::flex().autodiff();
    let (b, l, h, heads) = (2, 7, 12, 3);
    let q = leaf(random(&[b, l, h], 1), [b, l, h], &device);
    let k = leaf(random(&[b, l, h], 2), [b, l, h], &device);
    let v = leaf(random(&[b, l, h], 3), [b, l, h], &device);
    let bias = padded_bias(b, l, &device);
    let w = Tensor::<3>::from_data(TensorData::new(random(&[b, l, h], 4), [b, l, h]), &device);
    let out = if let Some(products) = fused {
        // The kernel takes the three packed on each row; their gradients come back through the
        // concatenation's backward.
        let qkv = Tensor::cat(vec![q.clone(), k.clone(), v.clone()], 2);
        kernels::attention::fused_call(qkv, bias, heads, dropout, products)
    } else {
        let mask = dropout.map(|m| {
            let mut values = vec![0f32; b * heads * l * l];
            for (head, chunk) in values.chunks_mut(l * l).enumerate() {
                fill_mask(chunk, m.p, m.seed, head as u64);
            }
            Tensor::<4>::from_data(TensorData::new(values, [b, heads, l, l]), &device)
        });
        composed_attention(q.clone(), k.clone(), v.clone(), bias, heads, mask)
    };
    let grads = (out.clone() * w).sum().backward();
    let grad = |t: &Tensor<3>| vec_of(t.grad(&grads).unwrap());
    vec![vec_of(out), grad(&q), grad(&k), grad(&v)]
}

#[test]
fn fused_attention_matches_the_composed_operations() {
    for dropout in [None, Some(DropMask { p: 0.3, seed: 11 })] {
        let fused = attention_case(Some(Products::F32), dropout);
        let composed = attention_case(None, dropout);
        for (name, (f, c)) in ["context", "dq", "dk", "dv"]
            .iter()
            .zip(fused.iter().zip(&composed))
        {
            assert_close(&format!("{name} (dropout {dropout:?})"), f, c, 2e-5);
        }
        // The padded keys of the second sequence get no gradient.
        let (l, h) = (7, 12);
        let dk = &fused[2];
        assert!(dk[(2 * l - 2) * h..].iter().all(|&g| g == 0.0));
        assert!(dk[..(2 * l - 2) * h].iter().any(|&g| g != 0.0));
    }
    // Dropout changes the result, and the same seed gives the same result.
    let a = attention_case(Some(Products::F32), Some(DropMask { p: 0.3, seed: 11 }));
    assert_eq!(
        a,
        attention_case(Some(Products::F32), Some(DropMask { p: 0.3, seed: 11 }))
    );
    assert_ne!(a[0], attention_case(Some(Products::F32), None)[0]);
}

#[test]
fn fused_attention_with_bf16_products_stays_within_bf16_rounding_of_f32() {
    let dropout = Some(DropMask { p: 0.3, seed: 11 });
    let bf16 = attention_case(Some(Products::Bf16), dropout);
    let f32 = attention_case(Some(Products::F32), dropout);
    for (name, (b, f)) in ["context", "dq", "dk", "dv"]
        .iter()
        .zip(bf16.iter().zip(&f32))
    {
        // bf16 keeps 8 bits of the mantissa: a relative rounding of 2⁻⁹ per operand.
        assert_close(name, b, f, 2e-2);
        assert_ne!(b, f, "{name}: the products were not rounded to bf16");
    }
}

#[test]
fn fused_attention_without_autodiff_gives_the_same_values() {
    let device = Device::flex();
    let (b, l, h, heads) = (2, 7, 12, 3);
    let t = |seed| {
        Tensor::<3>::from_data(
            TensorData::new(random(&[b, l, h], seed), [b, l, h]),
            &device,
        )
    };
    let bias = padded_bias(b, l, &device);
    let qkv = Tensor::cat(vec![t(1), t(2), t(3)], 2);
    let plain = vec_of(kernels::attention::fused_call(
        qkv,
        bias.clone(),
        heads,
        None,
        Products::F32,
    ));
    let composed = vec_of(composed_attention(t(1), t(2), t(3), bias, heads, None));
    assert_close("context", &plain, &composed, 2e-5);
    let tracked = attention_case(Some(Products::F32), None);
    assert_close("inference vs training", &plain, &tracked[0], 1e-6);
}

/// LayerNorm by burn's operations: (x − μ) / √(σ² + ε) ⊙ γ + β.
fn composed_layer_norm(x: Tensor<3>, gamma: Tensor<1>, beta: Tensor<1>, eps: f64) -> Tensor<3> {
    let (var, mean) = x.clone().var_mean_bias(2);
    (x - mean).div(var.add_scalar(eps).sqrt()) * gamma.unsqueeze::<3>() + beta.unsqueeze::<3>()
}

#[test]
fn fused_layer_norm_matches_the_composed_operations() {
    let device = Device::flex().autodiff();
    // 70 rows: more than one parallel block, the last one partial.
    let (b, l, h) = (2, 35, 24);
    let case = |fused: bool| {
        let x = leaf(random(&[b, l, h], 5), [b, l, h], &device);
        let gamma = leaf(random(&[h], 6), [h], &device);
        let beta = leaf(random(&[h], 7), [h], &device);
        let w = Tensor::<3>::from_data(TensorData::new(random(&[b, l, h], 8), [b, l, h]), &device);
        let y = if fused {
            kernels::layer_norm::fused_call(x.clone(), gamma.clone(), beta.clone(), 1e-12)
        } else {
            composed_layer_norm(x.clone(), gamma.clone(), beta.clone(), 1e-12)
        };
        let grads = (y.clone() * w).sum().backward();
        vec![
            vec_of(y),
            vec_of(x.grad(&grads).unwrap()),
            vec_of(gamma.grad(&grads).unwrap()),
            vec_of(beta.grad(&grads).unwrap()),
        ]
    };
    let (fused, composed) = (case(true), case(false));
    for (name, (f, c)) in ["y", "dx", "dgamma", "dbeta"]
        .iter()
        .zip(fused.iter().zip(&composed))
    {
        assert_close(name, f, c, 2e-5);
    }
}

#[test]
fn fused_kernels_do_not_depend_on_the_thread_count() {
    let run = |threads: usize| {
        on_threads(threads, || {
            let mut all = attention_case(Some(Products::F32), Some(DropMask { p: 0.2, seed: 3 }));
            let x = random(&[300, 16], 9);
            let gamma = random(&[16], 10);
            let beta = random(&[16], 11);
            let (y, saved) = kernels::layer_norm::forward(&x, &gamma, &beta, 1e-5, true);
            let (dx, dgamma, dbeta) = kernels::layer_norm::backward(&y, &saved, &gamma);
            all.extend([y, dx, dgamma, dbeta]);
            // One thread: the crates' single-threaded paths; three: their rayon paths.
            let threads = rayon::current_num_threads();
            // Linear: products over rayon's threads, bias gradient in fixed blocks; with
            // 1100 rows, `x·W` and `G·Wᵀ` go through faer (`gemm::FAER_MIN_ROWS`).
            for rows in [300, 1100] {
                let (x, w, b) = (
                    random(&[rows, 40], 17),
                    random(&[40, 50], 18),
                    random(&[50], 19),
                );
                let xv = kernels::gemm::View::rows(&x, 0, rows, 40, 40);
                let wv = kernels::gemm::View::rows(&w, 0, 40, 50, 50);
                let y = kernels::linear::forward(xv, wv, &b, kernels::Products::F32);
                let gv = kernels::gemm::View::rows(&y, 0, rows, 50, 50);
                // The backward pass's own pair (`∂x`, `∂W = xᵀ·G`), and `∂W` alone.
                let pair = kernels::linear::BackwardProducts::new(
                    xv,
                    gv,
                    wv,
                    false,
                    kernels::Products::F32,
                );
                let (dx, dw) = kernels::linear::grad_input_and_weight(pair);
                all.extend([
                    dx,
                    dw,
                    pair.grad_weight(threads),
                    kernels::linear::grad_bias(&y, 50),
                    y.clone(),
                ]);
            }
            // The MLM decoder's `∂E = Gᵀ·x` (a weight stored [out, in]): 4100 rows of a
            // transposed left operand, through faer (`gemm::FAER_MIN_ROWS_TRANSPOSED`), in the
            // pair with its share of columns handed over (160 columns: 16 shared).
            let (x, g, e) = (
                random(&[60, 160], 20),
                random(&[60, 4100], 21),
                random(&[4100, 160], 22),
            );
            let xv = kernels::gemm::View::rows(&x, 0, 60, 160, 160);
            let gv = kernels::gemm::View::rows(&g, 0, 60, 4100, 4100);
            let pair = kernels::linear::BackwardProducts::new(
                xv,
                gv,
                kernels::gemm::View::rows(&e, 0, 4100, 160, 160).t(),
                true,
                kernels::Products::F32,
            );
            let (dx, de) = kernels::linear::grad_input_and_weight(pair);
            all.extend([dx, de, pair.grad_weight(threads)]);
            all
        })
    };
    assert_eq!(run(1), run(3));
}

#[test]
fn fused_cross_entropy_matches_log_softmax() {
    let device = Device::flex().autodiff();
    let (n, vocab) = (5, 300);
    // Spread-out logits, some large, so that the max-shift matters.
    let values: Vec<f32> = random(&[n, vocab], 12).iter().map(|x| x * 20.0).collect();
    let labels =
        Tensor::<1, Int>::from_data(TensorData::new(vec![0i64, 17, 299, 150, 17], [n]), &device);
    let w = Tensor::<1>::from_data(
        TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0, 5.0], [n]),
        &device,
    );
    let case = |fused: bool| {
        let z = leaf(values.clone(), [n, vocab], &device);
        let nll = if fused {
            kernels::cross_entropy::fused_call(z.clone(), labels.clone()).nll
        } else {
            burn::tensor::activation::log_softmax(z.clone(), 1)
                .gather(1, labels.clone().reshape([n, 1]))
                .reshape([n])
                .neg()
        };
        let grads = (nll.clone() * w.clone()).sum().backward();
        vec![vec_of(nll), vec_of(z.grad(&grads).unwrap())]
    };
    let (fused, composed) = (case(true), case(false));
    assert_close("nll", &fused[0], &composed[0], 1e-5);
    assert_close("dz", &fused[1], &composed[1], 1e-5);
}

#[test]
fn the_cross_entropys_gradient_written_over_the_logits_is_the_same_as_into_a_new_buffer() {
    use kernels::cross_entropy::{backward, backward_in_place, forward};
    let (n, vocab) = (5, 300);
    let z: Vec<f32> = random(&[n, vocab], 43).iter().map(|x| x * 20.0).collect();
    let labels = [0usize, 17, 299, 150, 17];
    let grad = [1.0f32, -0.5, 0.25, 3.0, 0.0];
    let lse = forward(&z, &labels, vocab).lse;
    let fresh = backward(&grad, &z, &labels, &lse, vocab);
    let mut over = z.clone();
    backward_in_place(&grad, &mut over, &labels, &lse, vocab);
    assert!(
        fresh
            .iter()
            .zip(&over)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    assert!(fresh.iter().any(|&d| d != 0.0) && fresh != z);
    // Through the operation: logits that only the cross-entropy holds (an operation's output)
    // take the in-place path, logits the caller still holds the other; the gradients agree.
    let device = Device::flex().autodiff();
    let labels_t = Tensor::<1, Int>::from_data(
        TensorData::new(labels.iter().map(|&y| y as i64).collect::<Vec<_>>(), [n]),
        &device,
    );
    let w = Tensor::<1>::from_data(TensorData::new(grad.to_vec(), [n]), &device);
    let grad_of = |unshared: bool| {
        let z = leaf(z.clone(), [n, vocab], &device);
        let logits = if unshared { z.clone() * 1.0 } else { z.clone() };
        let nll = kernels::cross_entropy(logits, labels_t.clone());
        let grads = (nll * w.clone()).sum().backward();
        vec_of(z.grad(&grads).unwrap())
    };
    assert_eq!(grad_of(true), grad_of(false));
    assert_eq!(grad_of(true), fresh);
}

#[test]
fn the_fused_cross_entropys_argmax_is_each_rows_first_maximum_as_argmax_gives_it() {
    let device = Device::flex().autodiff();
    let vocab = 300;
    let mut values = random(&[6, vocab], 31);
    let mut set = |row: usize, col: usize, v: f32| values[row * vocab + col] = v;
    // A tie (the first one wins), the maximum at either end, in the last partial block of the
    // search, and twice within one block.
    set(0, 70, 5.0);
    set(0, 130, 5.0);
    set(1, 0, 5.0);
    set(2, vocab - 1, 5.0);
    set(3, 290, 5.0);
    set(3, 257, 5.0);
    set(4, 10, 5.0);
    set(4, 11, 5.0);
    let labels = Tensor::<1, Int>::from_data(TensorData::new(vec![3i64; 6], [6]), &device);
    let z = leaf(values, [6, vocab], &device);
    let scored = kernels::cross_entropy::fused_call(z.clone(), labels);
    let ids = |t: Tensor<1, Int>| t.into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
    let expected = ids(z.clone().argmax(1).squeeze_dim::<1>(1));
    assert_eq!(&expected[..5], &[70, 0, vocab as i64 - 1, 257, 10]);
    assert_eq!(ids(scored.argmax), expected);
}

#[test]
fn fused_linear_matches_the_composed_operations() {
    let device = Device::flex().autodiff();
    let d_in = 24;
    // Contiguous weight, a weight that is a transposed view, and a weight stored [out, in]
    // given to `linear_transposed` (the MLM decoder's tied embeddings): its gradient must come
    // back in that layout. 1100 rows: `x·W` and `G·Wᵀ` through faer (`gemm::FAER_MIN_ROWS`);
    // 4100 outputs stored [out, in]: `∂W = Gᵀ·x` through faer
    // (`gemm::FAER_MIN_ROWS_TRANSPOSED`).
    for (rows, d_out, transposed, as_rows) in [(70, 33), (1100, 33), (50, 4100)]
        .into_iter()
        .flat_map(|(r, o)| {
            [
                (r, o, false, false),
                (r, o, true, false),
                (r, o, true, true),
            ]
        })
    {
        let case = |fused: bool| {
            let x = leaf(random(&[rows, d_in], 13), [rows, d_in], &device);
            let stored = if transposed {
                [d_out, d_in]
            } else {
                [d_in, d_out]
            };
            let w0 = leaf(random(&[d_in, d_out], 14), stored, &device);
            let w = if transposed {
                w0.clone().transpose()
            } else {
                w0.clone()
            };
            let b = leaf(random(&[d_out], 15), [d_out], &device);
            let g = Tensor::<2>::from_data(
                TensorData::new(random(&[rows, d_out], 16), [rows, d_out]),
                &device,
            );
            let y = if fused && as_rows {
                kernels::linear::fused_call(
                    x.clone(),
                    w0.clone(),
                    b.clone(),
                    true,
                    kernels::Products::F32,
                )
            } else if fused {
                kernels::linear::fused_call(x.clone(), w, b.clone(), false, kernels::Products::F32)
            } else {
                x.clone().matmul(w) + b.clone().unsqueeze::<2>()
            };
            let grads = (y.clone() * g).sum().backward();
            vec![
                vec_of(y),
                vec_of(x.grad(&grads).unwrap()),
                vec_of(w0.grad(&grads).unwrap()),
                vec_of(b.grad(&grads).unwrap()),
            ]
        };
        let (fused, composed) = (case(true), case(false));
        for (name, (f, c)) in ["y", "dx", "dw", "db"]
            .iter()
            .zip(fused.iter().zip(&composed))
        {
            assert_close(
                &format!(
                    "{name} ({rows} rows, {d_out} out, transposed {transposed}, [out, in] {as_rows})"
                ),
                f,
                c,
                1e-5,
            );
        }
    }
}

/// Counts of `draws` over `vocab` against the probabilities `p`: Pearson's χ² over the tokens
/// with p > 0, and whether any token with p = 0 was drawn.
fn chi_square(draws: &[u32], p: &[f64]) -> (f64, bool) {
    let mut counts = vec![0usize; p.len()];
    for &d in draws {
        counts[d as usize] += 1;
    }
    let n = draws.len() as f64;
    let chi2 = p
        .iter()
        .zip(&counts)
        .filter(|(p, _)| **p > 0.0)
        .map(|(&p, &c)| (c as f64 - n * p).powi(2) / (n * p))
        .sum();
    let impossible = p.iter().zip(&counts).any(|(&p, &c)| p == 0.0 && c > 0);
    (chi2, impossible)
}

#[test]
fn generator_sampling_draws_from_the_softmax() {
    use trueneg::kernels::sampling::sample_rows;
    // 150 logits (two blocks of 64 and a partial one), spread over a factor e⁴ of weight, two
    // that can never be drawn (−∞, and −200 whose weight is 0 in f32) and one large one.
    let vocab = 150;
    let mut row: Vec<f32> = (0..vocab).map(|j| 2.0 * (0.37 * j as f32).sin()).collect();
    row[7] = f32::NEG_INFINITY;
    row[70] = -200.0;
    row[149] = 3.5;
    let max = row.iter().cloned().fold(f32::MIN, f32::max) as f64;
    let w: Vec<f64> = row
        .iter()
        .map(|&z| {
            if z < -150.0 {
                0.0
            } else {
                (z as f64 - max).exp()
            }
        })
        .collect();
    let total: f64 = w.iter().sum();
    let p: Vec<f64> = w.iter().map(|w| w / total).collect();

    let rows = 60_000;
    let z: Vec<f32> = row.iter().cycle().take(rows * vocab).cloned().collect();
    let draws = sample_rows(&z, vocab, 42);
    assert_eq!(draws.len(), rows);
    let (chi2, impossible) = chi_square(&draws, &p);
    assert!(!impossible, "a token of probability 0 was drawn");
    // 147 degrees of freedom: mean 147, sd ~17; 260 is ~6.5 sd out.
    assert!(chi2 < 260.0, "χ² {chi2} over 147 degrees of freedom");
    // A wrong distribution fails the same test: the draws against uniform probabilities.
    let uniform: Vec<f64> = p
        .iter()
        .map(|&p| if p > 0.0 { 1.0 / 148.0 } else { 0.0 })
        .collect();
    assert!(chi_square(&draws, &uniform).0 > 1000.0);

    // Each row draws from its own stream: the same with 1 or 3 threads, and another seed
    // draws otherwise.
    let with = |threads: usize| on_threads(threads, || sample_rows(&z[..500 * vocab], vocab, 7));
    assert_eq!(with(1), with(3));
    assert_ne!(with(1), sample_rows(&z[..500 * vocab], vocab, 8));
    // A dominant logit is always drawn; a row of −∞ draws its first index.
    let mut peaked = vec![0f32; 200];
    peaked[123] = 40.0;
    assert!(
        sample_rows(&peaked.repeat(100), 200, 1)
            .iter()
            .all(|&d| d == 123)
    );
    assert_eq!(sample_rows(&[f32::NEG_INFINITY; 10], 10, 1), vec![0]);
}

#[test]
fn generator_sampling_in_place_draws_what_the_sampler_draws_on_a_host_copy() {
    // f32 logits are read in place by the fused kernel; bf16 ones are copied to the host as
    // f32 first. Logits exact in bf16 hold the same values both ways, so the same seed must
    // draw the same ids, in the same integer dtype.
    let device = Device::flex().autodiff();
    let (rows, vocab) = (40, 300);
    let z: Vec<f32> = (0..rows * vocab)
        .map(|i| ((i * 37 % 61) as f32 - 30.0) / 8.0)
        .collect();
    let logits = Tensor::<2>::from_data(TensorData::new(z, [rows, vocab]), &device);
    let draw = |t: &Tensor<2>, seed: u64| {
        trueneg::model::seed(&device, seed);
        kernels::sample(t)
    };
    let ids =
        |t: Tensor<1, Int>| -> Vec<i64> { t.into_data().convert::<i64>().try_into_vec().unwrap() };
    let in_place = draw(&logits, 11);
    let copied = draw(&logits.clone().cast(burn::tensor::FloatDType::BF16), 11);
    assert_eq!(in_place.dtype(), copied.dtype());
    assert_eq!(in_place.dims(), [rows]);
    let in_place = ids(in_place);
    assert_eq!(in_place, ids(copied));
    assert!(in_place.iter().all(|&i| (0..vocab as i64).contains(&i)));
    assert_ne!(
        in_place,
        ids(draw(&logits, 12)),
        "another seed draws other ids"
    );
}

#[test]
fn products_that_do_not_accumulate_never_read_their_destination() {
    // `gemm::product_new` hands the gemm crate or faer uninitialised buffers: a destination
    // full of NaN must come back as the product, through each of their paths (vector products,
    // small and large blocks, an empty inner dimension, either operand transposed, one thread
    // or several; faer for the row-major `a` of `gemm::FAER_MIN_ROWS` rows or more, and any
    // `a` of `gemm::FAER_MIN_ROWS_TRANSPOSED`).
    use kernels::gemm::{Route, View, ViewMut, product_into_on};
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    for (m, k, n) in [
        (1, 7, 5),
        (5, 7, 1),
        (1, 300, 1),
        (3, 1, 6),
        (16, 7, 6),
        (17, 0, 9),
        (70, 300, 64),
        (300, 64, 70),
        // At least `gemm::FAER_MIN_ROWS` rows: through faer when `a` is row-major.
        (1030, 33, 70),
        (1024, 300, 1),
        (1030, 0, 9),
        // At least `gemm::FAER_MIN_ROWS_TRANSPOSED`: through faer either way.
        (4100, 20, 9),
        (4096, 0, 3),
    ] {
        for (at, bt) in [(false, false), (true, false), (false, true), (true, true)] {
            let a = random(&[m, k], 1);
            let b = random(&[k, n], 2);
            // A transposed operand is stored as the transpose of a row-major matrix.
            let store = |x: &[f32], r: usize, c: usize, t: bool| -> Vec<f32> {
                if !t {
                    return x.to_vec();
                }
                (0..c * r).map(|i| x[(i % r) * c + i / r]).collect()
            };
            let (sa, sb) = (store(&a, m, k, at), store(&b, k, n, bt));
            let view = |x: &[f32], r: usize, c: usize, t: bool| {
                if t {
                    View::rows(x, 0, c, r, r).t()
                } else {
                    View::rows(x, 0, r, c, c)
                }
            };
            let want: Vec<f32> = (0..m * n)
                .map(|i| {
                    let (r, c) = (i / n, i % n);
                    (0..k)
                        .map(|j| a[r * k + j] as f64 * b[j * n + c] as f64)
                        .sum::<f64>() as f32
                })
                .collect();
            for threads in [1, 3] {
                let mut dst = vec![f32::NAN; m * n];
                let left = view(&sa, m, k, at);
                pool.install(|| unsafe {
                    product_into_on(
                        ViewMut::rows(&mut dst, 0, m, n, n),
                        left,
                        view(&sb, k, n, bt),
                        threads,
                        Route::new(&left, Products::F32),
                    )
                });
                assert_close(
                    &format!("{m}x{k}x{n} {at} {bt} {threads}"),
                    &dst,
                    &want,
                    1e-4,
                );
            }
        }
    }
}

#[test]
fn a_linear_backward_pair_cut_into_parts_keeps_each_products_sums() {
    // ∂W is cut into parts (across its rows where it has more rows than columns, else across
    // its columns) that two halves of the threads take, one half computing ∂x first, and the
    // bias's column sums go to the half that ends first: the pair must be the two products
    // whole, and the sums the bias's own pass, bit for bit, through each kernel, in f32 and in bf16, on
    // 2 and 3 threads. The shapes: the gemm crate's weight gradients cut by columns (64 × 256,
    // 64 × 700) and by rows (256 × 64), with inner dimensions of 700 and 1100, past the 512 at
    // which the crate blocks a product of at most 64 × 64 otherwise than a larger one; a
    // transposed weight of 4100 rows, as the MLM decoder's, whose whole product goes to faer
    // while its parts alone would go to the gemm crate (`gemm::Route` keeps them on faer), with
    // 600 rows of `x` as the inner dimension, where the two crates' sums differ.
    use kernels::gemm::View;
    use kernels::linear::{self, BackwardProducts, SHARED_STEP};
    let shapes = [
        (700, 64, 256, false),
        (300, 256, 64, false),
        (1100, 64, 700, false),
        (600, 160, 4100, true),
    ];
    for (rows, inp, out, transposed) in shapes {
        let x = random(&[rows, inp], 11);
        let g = random(&[rows, out], 12);
        let w = random(&[inp, out], 13);
        let (xv, gv) = (
            View::rows(&x, 0, rows, inp, inp),
            View::rows(&g, 0, rows, out, out),
        );
        // W as `[inp, out]`, stored `[out, inp]` when transposed.
        let wv = if transposed {
            View::rows(&w, 0, out, inp, inp).t()
        } else {
            View::rows(&w, 0, inp, out, out)
        };
        // ∂W's longer side: it is cut across that one.
        assert!(inp.max(out) / 8 >= SHARED_STEP, "parts to hand over");
        for products in [Products::F32, Products::Bf16] {
            let pair = BackwardProducts::new(xv, gv, wv, transposed, products);
            for threads in [2, 3] {
                let (dx, dw) = on_threads(threads, || linear::grad_input_and_weight(pair));
                let whole_dx = on_threads(1, || linear::grad_input(gv, wv, 1, products));
                let whole_dw = on_threads(1, || pair.grad_weight(1));
                let name = format!("{rows}x{inp}x{out} {transposed} {products:?} {threads}");
                assert!(dx == whole_dx, "{name}: ∂x");
                assert!(dw == whole_dw, "{name}: ∂W");
                // With the bias's sums taken by the half that ends first: the same pair, and
                // the sums of the bias's own pass.
                let (dx, dw, db) =
                    on_threads(threads, || linear::grad_input_weight_and_bias(pair, &g));
                let whole_db = on_threads(threads, || linear::grad_bias(&g, out));
                assert!(
                    dx == whole_dx && dw == whole_dw,
                    "{name}: the pair beside ∂b"
                );
                assert!(db == whole_db, "{name}: ∂b");
            }
        }
    }
}

/// Block `l` of a batch: its four words.
fn philox_block(batch: &[u32], l: usize) -> [u32; 4] {
    use trueneg::kernels::dropout::philox::LANES;
    [0, 1, 2, 3].map(|j| batch[j * LANES + l])
}

#[test]
fn philox_blocks_match_the_reference_known_answers() {
    use trueneg::kernels::dropout::philox::words;
    // Random123's known-answer vectors for Philox4x32-10, as (key, stream, block): the
    // counter's halves are [block, block >> 32, stream, stream >> 32], the key's [key, key >> 32].
    let known = [
        (
            (0, 0, 0),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
        ),
        (
            (u64::MAX, u64::MAX, u64::MAX),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
        ),
        (
            (
                0x299f_31d0_a409_3822,
                0x0370_7344_1319_8a2e,
                0x85a3_08d3_243f_6a88,
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
        ),
    ];
    for ((key, stream, block), want) in known {
        assert_eq!(philox_block(&words(key, stream, block), 0), want);
    }
}

#[test]
fn philox_batches_are_the_words_of_consecutive_counters_lane_by_lane() {
    use trueneg::kernels::dropout::philox::{LANES, words};
    let (key, stream) = (0x0123_4567_89ab_cdef_u64, (7u64 << 32) | 3);
    // A batch that crosses a carry into the counter's high word: its lane l is lane 0 of the
    // batch that starts l blocks later.
    let first = u64::from(u32::MAX) - 5;
    let batch = words(key, stream, first);
    for l in 0..LANES {
        let alone = words(key, stream, first + l as u64);
        assert_eq!(
            philox_block(&batch, l),
            philox_block(&alone, 0),
            "block {l}"
        );
    }
}

#[test]
fn dropout_mask_chunks_are_the_stream_words_against_the_threshold() {
    use trueneg::kernels::dropout::philox::{BATCH, LANES, words};
    // A length that ends inside a batch: the words are taken in order, batch after batch.
    let n = 3 * BATCH + 17;
    let mut mask = vec![f32::NAN; n];
    fill_mask(&mut mask, 0.25, 99, 4);
    let threshold = (0.25 * 4_294_967_296.0) as u32;
    for (i, &m) in mask.iter().enumerate() {
        let w = words(99, 4, (i / BATCH * LANES) as u64)[i % BATCH];
        let want = if w < threshold { 0.0 } else { 1.0 / 0.75 };
        assert_eq!(m, want, "element {i}");
    }
}
