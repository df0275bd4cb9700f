//! A sublayer's dropout and residual sum as one operation (`kernels::dropout_add`): its sum and
//! both gradients equal the composed `h · mask + r` bit for bit, the mask being the one
//! `mask_values` draws for the same seed, over several of the mask's chunks and a partial one.

use burn::prelude::*;
use trueneg::kernels::dropout::{mask_values, residual};

use crate::common;
use common::{leaf, random, vec_of};

/// 40,000 elements: two whole chunks of the mask and a partial third.
const SHAPE: [usize; 2] = [40, 1000];
const P: f64 = 0.1;
const SEED: u64 = 0x5EED;

/// The sum, `∂h` and `∂r` of `Σ (r + dropout(h)) ⊙ w`: our kernel, or the composed operations
/// with the mask of the same seed.
fn case(fused: bool) -> Vec<Vec<f32>> {
    let device = Device::flex().autodiff();
    let n = SHAPE[0] * SHAPE[1];
    let h = leaf(random(&SHAPE, 51), SHAPE, &device);
    let r = leaf(random(&SHAPE, 52), SHAPE, &device);
    let w = Tensor::<2>::from_data(TensorData::new(random(&SHAPE, 53), SHAPE), &device);
    let sum = if fused {
        residual::fused_call(h.clone(), r.clone(), P, SEED)
    } else {
        let mask = TensorData::new(mask_values(n, P, SEED), SHAPE);
        h.clone() * Tensor::<2>::from_data(mask, &device) + r.clone()
    };
    let grads = (sum.clone() * w).sum().backward();
    vec![
        vec_of(sum),
        vec_of(h.grad(&grads).unwrap()),
        vec_of(r.grad(&grads).unwrap()),
    ]
}

#[test]
fn dropout_add_is_the_composed_dropout_and_residual_sum_bit_for_bit() {
    let (fused, composed) = (case(true), case(false));
    for (name, (a, b)) in ["sum", "∂h", "∂r"].iter().zip(fused.iter().zip(&composed)) {
        let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(
            same && a.len() == b.len(),
            "{name} differs from the composed one"
        );
    }
    // The mask did drop elements, in every chunk, and `∂h` is zero exactly there.
    let dh = &fused[1];
    for chunk in dh.chunks(1 << 14) {
        let dropped = chunk.iter().filter(|&&d| d == 0.0).count();
        assert!(
            dropped > chunk.len() / 20 && dropped < chunk.len() / 5,
            "{dropped} dropped"
        );
    }
}

#[test]
fn dropout_add_forward_keeps_which_elements_the_mask_kept() {
    let n = 3000;
    let (h, r) = (random(&[n], 54), random(&[n], 55));
    let (sum, kept) = residual::forward(&h, &r, P, SEED);
    let mask = mask_values(n, P, SEED);
    for i in 0..n {
        assert_eq!(kept[i] != 0, mask[i] != 0.0, "element {i}");
        assert_eq!(
            sum[i].to_bits(),
            (h[i] * mask[i] + r[i]).to_bits(),
            "element {i}"
        );
    }
    let g = random(&[n], 56);
    let dh = residual::backward(&g, &kept, P);
    assert!((0..n).all(|i| dh[i].to_bits() == (g[i] * mask[i]).to_bits()));
}
