//! The true-negative objectives on small hand-made tensors and tables, against values computed
//! by hand from their formulas.

use burn::prelude::*;
use trueneg::objective::hard_correction::correction_weights;
use trueneg::objective::masked_cross_entropy;
use trueneg::objective::sentence_regularization::sentence_regularization;
use trueneg::objective::soft_regularization::word_regularization;
use trueneg::text::SynonymTable;

fn dev() -> Device {
    Device::flex().autodiff()
}

fn t2(v: Vec<f32>, shape: [usize; 2], d: &Device) -> Tensor<2> {
    Tensor::from_data(TensorData::new(v, shape), d)
}

fn i1(v: Vec<i64>, d: &Device) -> Tensor<1, Int> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), d)
}

fn host<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap()
}

fn log_softmax_row(row: &[f64], k: usize) -> f64 {
    let m = row.iter().cloned().fold(f64::MIN, f64::max);
    let z: f64 = row.iter().map(|x| (x - m).exp()).sum();
    row[k] - m - z.ln()
}

/// Table over a vocabulary of 8: 5 ↔ 6 and 6 ↔ 7 are synonyms.
fn table() -> SynonymTable {
    SynonymTable::from_pairs(8, "fp".into(), "test".into(), vec![(5, 6), (7, 6)])
}

#[test]
fn table_is_symmetric_and_sorted() {
    let t = table();
    assert_eq!(t.synonyms(6), &[5, 7]);
    assert_eq!(t.synonyms(5), &[6]);
    assert!(t.are_synonyms(7, 6) && t.are_synonyms(6, 7));
    assert!(!t.are_synonyms(5, 7), "not transitive");
    assert!(!t.are_synonyms(5, 5), "a token is not its own synonym");
    assert!(t.synonyms(0).is_empty());
}

#[test]
fn hard_correction_drops_exactly_the_synonym_mismatches_and_renormalises() {
    // Positions: gold 5 pred 6 (synonym: corrected), gold 5 pred 5 (match), gold 7 pred 2
    // (mismatch, not a synonym), gold 7 pred 6 (corrected, second sequence).
    let gold = [5u32, 5, 7, 7];
    let pred = [6u32, 5, 2, 6];
    let rows = [0usize, 0, 1, 2];
    let (w, c) = correction_weights(&pred, &gold, &rows, 4, &table());
    assert_eq!(w, vec![0.0, 1.0, 1.0, 0.0]);
    assert_eq!((c.masked, c.mismatched, c.corrected), (4, 3, 2));
    assert_eq!((c.sequences, c.sequences_corrected), (4, 2));

    let d = dev();
    let logits: Vec<f32> = (0..32).map(|i| ((i * 7 % 11) as f32) * 0.3 - 1.0).collect();
    let lt = t2(logits.clone(), [4, 8], &d).require_grad();
    let n = 4;
    let wt = Tensor::<1>::from_data(TensorData::new(w.clone(), [n]), &d);
    let loss = masked_cross_entropy(
        lt.clone(),
        i1(gold.iter().map(|&g| g as i64).collect(), &d),
        Some(wt),
    );
    // By hand: mean over kept positions 1 and 2 only.
    let row = |r: usize| {
        logits[r * 8..(r + 1) * 8]
            .iter()
            .map(|&x| x as f64)
            .collect::<Vec<_>>()
    };
    let want = -(log_softmax_row(&row(1), 5) + log_softmax_row(&row(2), 7)) / 2.0;
    let got = loss.clone().into_scalar::<f32>() as f64;
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    // Corrected positions get no gradient.
    let g = lt.grad(&loss.backward()).unwrap();
    let g = host(g);
    assert!(g[0..8].iter().all(|&x| x == 0.0) && g[24..32].iter().all(|&x| x == 0.0));
    // Kept positions: exactly (softmax(z) − onehot(y)) / 2.
    for (r, y) in [(1usize, 5usize), (2, 7)] {
        let z = row(r);
        for j in 0..8 {
            let p = log_softmax_row(&z, j).exp();
            let want = (p - if j == y { 1.0 } else { 0.0 }) / 2.0;
            let got = g[r * 8 + j] as f64;
            assert!(
                (got - want).abs() < 1e-6,
                "grad row {r} col {j}: {got} vs {want}"
            );
        }
    }

    // Without weights: the plain mean over all four positions.
    let plain = masked_cross_entropy(
        t2(logits.clone(), [4, 8], &d),
        i1(vec![5, 5, 7, 7], &d),
        None,
    )
    .into_scalar::<f32>() as f64;
    let want_all = -(0..4)
        .map(|r| log_softmax_row(&row(r), gold[r] as usize))
        .sum::<f64>()
        / 4.0;
    assert!((plain - want_all).abs() < 1e-5);
}

#[test]
fn word_regularization_is_one_minus_cosine_with_gradient_into_both_rows() {
    let d = dev();
    // Rows: e0 = (1, 0), e1 = (0, 2), e2 = (1, 1), e3 = (3, 4).
    let e = t2(vec![1.0, 0.0, 0.0, 2.0, 1.0, 1.0, 3.0, 4.0], [4, 2], &d).require_grad();
    let pred = i1(vec![0, 2, 3], &d);
    let gold = i1(vec![2, 2, 1], &d);
    let loss = word_regularization(e.clone(), pred, gold);
    let cos02 = 1.0 / 2f64.sqrt();
    let cos31 = 8.0 / (5.0 * 2.0);
    let want = ((1.0 - cos02) + 0.0 + (1.0 - cos31)) / 3.0;
    let got = loss.clone().into_scalar::<f32>() as f64;
    assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    let g = host(e.grad(&loss.backward()).unwrap());
    // Row 0 (pred) and row 2 (gold) get gradient from the first pair; rows 3 and 1 from the third.
    for r in [0usize, 1, 3] {
        assert!(
            g[2 * r..2 * r + 2].iter().any(|&x| x.abs() > 1e-6),
            "row {r} has gradient"
        );
    }
    // d/d e0 of (1 - cos(e0, e2)) / 3 at e0 = (1,0), e2 = (1,1): -(e2/|e2| - cos·e0/|e0|)/|e0| / 3.
    let want_e0 = [-(cos02 - cos02) / 3.0, -(cos02 - 0.0) / 3.0];
    assert!(
        (g[0] as f64 - want_e0[0]).abs() < 1e-5 && (g[1] as f64 - want_e0[1]).abs() < 1e-5,
        "{:?}",
        &g[0..2]
    );
}

#[test]
fn sentence_regularization_is_token_kl_over_real_tokens() {
    let d = dev();
    let hp: Tensor<3> = Tensor::from_data(
        TensorData::new(vec![0.0f32, 1.0, 2.0, 0.5, 0.5, 0.5], [1, 2, 3]),
        &d,
    );
    let hs: Tensor<3> = Tensor::from_data(
        TensorData::new(vec![1.0f32, 1.0, 0.0, 9.0, 9.0, 9.0], [1, 2, 3]),
        &d,
    );
    let real = t2(vec![1.0, 0.0], [1, 2], &d);
    let got = sentence_regularization(hp.clone(), hs, real).into_scalar::<f32>() as f64;
    let sm = |v: [f64; 3]| {
        let z: f64 = v.iter().map(|x| x.exp()).sum();
        v.map(|x| x.exp() / z)
    };
    let (p, q) = (sm([0.0, 1.0, 2.0]), sm([1.0, 1.0, 0.0]));
    let want: f64 = (0..3).map(|j| p[j] * (p[j].ln() - q[j].ln())).sum();
    assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    let zero = sentence_regularization(hp.clone(), hp, t2(vec![1.0, 1.0], [1, 2], &d))
        .into_scalar::<f32>();
    assert!(zero.abs() < 1e-7);
}

#[test]
fn multi_piece_words_are_corrected_when_their_pieces_spell_a_synonym() {
    use trueneg::text::multi_piece::MultiPiece;
    // Vocabulary: 0 [PAD] 1 stay 2 ##ed 3 remain 4 the 5 rest 6 ##ing
    let tokens: Vec<String> = ["[PAD]", "stay", "##ed", "remain", "the", "rest", "##ing"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mp = MultiPiece {
        tokens,
        synonyms: Box::new(|w: &str| {
            if w == "stayed" {
                vec!["remained".into()]
            } else {
                vec![]
            }
        }),
    };
    // One row of 6: "the stay ##ed the rest ##ing"; masked: 1, 2 (the whole word "stayed"),
    // 4 (only the first piece of "resting": not a whole masked word).
    let ids = [4u32, 1, 2, 4, 5, 6];
    let positions = [1usize, 2, 4];
    let words = mp.masked_words(&ids, 6, &positions);
    assert_eq!(words, vec![vec![0, 1]]);
    let gold = [1u32, 2, 5];
    let mut w = vec![1.0f32; 3];
    // Predicted "remain ##ed" spells "remained", a synonym of "stayed".
    assert_eq!(mp.correct(&words, &[3, 2, 4], &gold, &mut w), 2);
    assert_eq!(w, vec![0.0, 0.0, 1.0]);
    // Predicted "remain ##ing" spells "remaining": not a synonym.
    let mut w = vec![1.0f32; 3];
    assert_eq!(mp.correct(&words, &[3, 6, 4], &gold, &mut w), 0);
    assert_eq!(w, vec![1.0; 3]);
}

#[test]
fn cross_entropy_stays_finite_on_extreme_logits() {
    // The gold token 300 below the best one: softmax(z)[y] underflows to 0 in f32, the loss
    // must still be lse − z[y] = 300 (+ ln(1 + e^-300 + …) ≈ 300), not infinite.
    let d = dev();
    let logits = vec![200.0f32, -100.0, 0.0, 0.0];
    let lt = t2(logits, [1, 4], &d).require_grad();
    let loss = masked_cross_entropy(lt.clone(), i1(vec![1], &d), None);
    let got = loss.clone().into_scalar::<f32>() as f64;
    assert!((got - 300.0).abs() < 1e-3, "{got}");
    let g = host(lt.grad(&loss.backward()).unwrap());
    assert!(
        (g[0] - 1.0).abs() < 1e-6 && (g[1] + 1.0).abs() < 1e-6,
        "{g:?}"
    );
}
