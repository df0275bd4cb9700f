//! CLINE's losses on hand-computed cases: values and gradients.

use burn::prelude::*;
use trueneg::objective::contrastive::*;

fn device() -> Device {
    Device::flex().autodiff()
}

fn m(rows: &[[f32; 2]], d: &Device) -> Tensor<2> {
    let v: Vec<f32> = rows.iter().flatten().copied().collect();
    Tensor::from_data(TensorData::new(v, [rows.len(), 2]), d)
}

fn val(t: Tensor<1>) -> f32 {
    t.into_scalar::<f32>()
}

/// softplus(x) = ln(1 + e^x), written out for the expected values.
fn sp(x: f32) -> f32 {
    (1.0 + x.exp()).ln()
}

fn close(a: f32, b: f32) {
    assert!((a - b).abs() < 1e-5, "{a} vs {b}");
}

#[test]
fn contrast_losses_match_hand_computed_values_and_gradients() {
    let d = device();
    let o = m(&[[1.0, 0.0], [0.0, 1.0]], &d).require_grad();
    let s = m(&[[1.0, 0.0], [0.0, 2.0]], &d);
    let a = m(&[[0.0, 1.0], [1.0, 0.0]], &d);
    // Rows: o·s = 1, 2 and o·a = 0, 0 → mean(softplus(−1), softplus(−2)).
    let l = infonce_contrast(o.clone(), s.clone(), a.clone());
    close(val(l.clone()), (sp(-1.0) + sp(-2.0)) / 2.0);
    // ∂L/∂o_b = σ(o·a − o·s)(a_b − s_b) / B.
    let g = l.backward();
    let go = o.grad(&g).unwrap().into_data().try_to_vec::<f32>().unwrap();
    let s1 = 1.0 / (1.0 + 1f32.exp());
    let s2 = 1.0 / (1.0 + 2f32.exp());
    for (x, y) in go
        .iter()
        .zip([-s1 / 2.0, s1 / 2.0, s2 / 2.0, -s2 * 2.0 / 2.0])
    {
        close(*x, y);
    }
    // BCE on means over the 2 dimensions: x(o,s) = 0.5, 1; x(o,a) = 0, 0.
    let b = bce_contrast(o.clone(), s.clone(), a.clone());
    close(val(b), ((sp(-0.5) + sp(0.0)) + (sp(-1.0) + sp(0.0))) / 2.0);
    close(val(syn_closer(o, s, a)), 1.0);
}

#[test]
fn detection_losses_ignore_unlabelled_pieces() {
    let d = device();
    let logits = Tensor::<2>::from_data(TensorData::new(vec![0.0f32, 2.0, -1.0], [1, 3]), &d);
    let labels = Tensor::<2, Int>::from_data(TensorData::new(vec![0i64, 1, -100], [1, 3]), &d);
    // BCE(0, 0) = ln 2 and BCE(2, 1) = softplus(−2); the −100 piece is left out.
    close(
        val(binary_detection_loss(logits, labels)),
        (sp(0.0) + sp(-2.0)) / 2.0,
    );
    let logits3 = Tensor::<3>::from_data(
        TensorData::new(
            vec![0.0f32, 0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 0.0],
            [1, 3, 3],
        ),
        &d,
    );
    let labels3 = Tensor::<2, Int>::from_data(TensorData::new(vec![2i64, -100, 0], [1, 3]), &d);
    // −log(1/3) and −log(e²/(e² + 2)).
    close(
        val(three_way_detection_loss(logits3, labels3)),
        (3f32.ln() + (1.0 + 2.0 * (-2f32).exp()).ln()) / 2.0,
    );
}

#[test]
fn learned_weighting_value_and_gradient() {
    let d = device();
    let l = Tensor::<1>::from_data(TensorData::new(vec![1.0f32, 2.0], [2]), &d);
    let s =
        Tensor::<1>::from_data(TensorData::new(vec![0.0f32, 2f32.ln()], [2]), &d).require_grad();
    let total = learned_weighting(l, s.clone());
    // 1·1 + ½·2 + max(0, 0) + max(ln 2, 0).
    close(val(total.clone()), 2.0 + 2f32.ln());
    // ∂/∂s_i = −e^{−s_i} L_i + [s_i > 0].
    let g = total.backward();
    let gs = s.grad(&g).unwrap().into_data().try_to_vec::<f32>().unwrap();
    close(gs[0], -1.0);
    close(gs[1], 0.0);
}
