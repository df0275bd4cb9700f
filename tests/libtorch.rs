//! The LibTorch calls of `kernels::libtorch` (feature `tch`) against burn's composed operations
//! on LibTorch's CPU device: values and gradients of the biased product, attention (with and without padding, with
//! dropout), LayerNorm, GELU, dropout and the cross-entropy, bf16 against f32, and a resumed
//! pre-training run on LibTorch. `tests/suite/golden.rs` checks the whole model on this path against
//! transformers.
//!
//! Run with `scripts/libtorch-tests.sh` (it fetches PyTorch's wheel and builds against it; CI
//! runs it), or by hand as docs/gpu.md's "Cargo features and GPUs" says.
#![cfg(feature = "tch")]

use burn::prelude::*;
use burn::tensor::FloatDType;
use burn::tensor::activation::{gelu, log_softmax, softmax};
use trueneg::kernels;

mod common;
use common::{assert_close, leaf, random, vec_of};

/// LibTorch's CPU device, or the device `TRUENEG_LIBTORCH_DEVICE` names (on a GPU machine:
/// `libtorch-cuda`, where attention runs LibTorch's flash / memory-efficient kernels).
fn device() -> Device {
    let name = std::env::var("TRUENEG_LIBTORCH_DEVICE").unwrap_or("libtorch".into());
    trueneg::device::device_for(&name).unwrap().autodiff()
}

/// LibTorch's generator is one per process: tests that seed it and draw from it take turns.
static GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `Σ y ⊙ w` for fixed random weights `w`, so that every output element's gradient differs.
fn weighted<const D: usize>(y: Tensor<D>, seed: u64) -> Tensor<1> {
    let dims = y.dims();
    let w = Tensor::<D>::from_data(TensorData::new(random(&dims, seed), dims), &y.device());
    (y * w).sum()
}

const B: usize = 3;
const L: usize = 7;
const HEADS: usize = 2;
const DH: usize = 8;
const H: usize = HEADS * DH;

/// softmax(Q Kᵀ / √d + bias) V per head, from burn's operations.
fn composed_attention(qkv: Tensor<3>, bias: Option<Tensor<2>>) -> Tensor<3> {
    let part = |i: usize| {
        qkv.clone()
            .slice([0..B, 0..L, i * H..(i + 1) * H])
            .reshape([B, L, HEADS, DH])
            .swap_dims(1, 2)
    };
    let mut scores = part(0)
        .matmul(part(1).swap_dims(2, 3))
        .mul_scalar(1.0 / (DH as f64).sqrt());
    if let Some(bias) = bias {
        scores = scores + bias.reshape([B, 1, 1, L]);
    }
    softmax(scores, 3)
        .matmul(part(2))
        .swap_dims(1, 2)
        .reshape([B, L, H])
}

/// Key bias: sequence 1 has 2 padded keys, sequence 2 has 5, with the model's bias value
/// (`f32::MIN`, which is −∞ once cast to bf16).
fn padding(device: &Device) -> Tensor<2> {
    let mut bias = vec![0f32; B * L];
    for (b, real) in [(1, 5), (2, 2)] {
        for k in real..L {
            bias[b * L + k] = f32::MIN;
        }
    }
    Tensor::from_data(TensorData::new(bias, [B, L]), device)
}

#[test]
fn the_libtorch_device_takes_the_libtorch_calls() {
    assert!(kernels::torch(&device()));
    assert!(!kernels::torch(&Device::flex().autodiff()));
}

#[test]
fn attention_matches_the_composed_operations() {
    let d = device();
    let values = random(&[B, L, 3 * H], 1);
    for padded in [false, true] {
        let bias = padded.then(|| padding(&d));
        let x = leaf(values.clone(), [B, L, 3 * H], &d);
        let y = kernels::attention::torch_call(x.clone(), bias.clone(), HEADS, 0.0);
        let gx = x.grad(&weighted(y.clone(), 2).backward()).unwrap();

        let r = leaf(values.clone(), [B, L, 3 * H], &d);
        let ry = composed_attention(r.clone(), bias);
        let gr = r.grad(&weighted(ry.clone(), 2).backward()).unwrap();

        assert_eq!(y.dims(), [B, L, H]);
        assert_close("context", &vec_of(y), &vec_of(ry), 1e-5);
        assert_close("∂qkv", &vec_of(gx), &vec_of(gr), 1e-4);
    }
    // The padding matters: without it the padded sequences' contexts differ.
    let x = leaf(values.clone(), [B, L, 3 * H], &d);
    let with = vec_of(kernels::attention::torch_call(
        x.clone(),
        Some(padding(&d)),
        HEADS,
        0.0,
    ));
    let without = vec_of(kernels::attention::torch_call(x, None, HEADS, 0.0));
    assert_eq!(with[..L * H], without[..L * H], "sequence 0 has no padding");
    assert_ne!(with[L * H..], without[L * H..]);
}

/// With dropout the backward pass uses the forward pass's mask: re-seeding LibTorch's generator
/// repeats the mask, so the gradient must match central differences of the same-mask outputs.
#[test]
fn attention_dropout_repeats_with_the_seed_and_its_gradient_uses_the_mask() {
    let _turn = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let d = device();
    let values = random(&[B, L, 3 * H], 3);
    let run = |v: &[f32]| {
        trueneg::model::seed(&d, 11);
        let x = leaf(v.to_vec(), [B, L, 3 * H], &d);
        let y = kernels::attention::torch_call(x.clone(), Some(padding(&d)), HEADS, 0.3);
        (x, y)
    };
    let (x, y) = run(&values);
    let (_, again) = run(&values);
    let no_dropout = kernels::attention::torch_call(
        leaf(values.clone(), [B, L, 3 * H], &d),
        Some(padding(&d)),
        HEADS,
        0.0,
    );
    let y_values = vec_of(y.clone());
    assert_eq!(y_values, vec_of(again), "same seed, same mask");
    assert_ne!(y_values, vec_of(no_dropout), "dropout is applied");

    let loss = |y: Tensor<3>| weighted(y, 4).into_scalar::<f32>() as f64;
    let g = vec_of(x.grad(&weighted(y, 4).backward()).unwrap());
    let eps = 1e-2f32;
    // A few coordinates of Q, K and V in sequences 0 and 2.
    for i in [
        0,
        H + 3,
        2 * H + 5,
        2 * L * 3 * H + 1,
        2 * L * 3 * H + 2 * H + 7,
    ] {
        let mut plus = values.clone();
        plus[i] += eps;
        let mut minus = values.clone();
        minus[i] -= eps;
        let numeric = (loss(run(&plus).1) - loss(run(&minus).1)) / (2.0 * eps as f64);
        assert!(
            (numeric - g[i] as f64).abs() < 2e-2 * (1.0 + numeric.abs()),
            "∂qkv[{i}]: backward {} vs differences {numeric}",
            g[i]
        );
    }
}

/// `x W + b` as one `addmm` against burn's product and sum, in f32 and in bf16, with `W` also
/// as a transposed view (as the tied MLM decoder passes it).
#[test]
fn linear_matches_the_composed_operations() {
    let d = device();
    let (rows, d_in, d_out) = (9, 12, 20);
    let (xs, ws, bs) = (
        random(&[rows, d_in], 30),
        random(&[d_in, d_out], 31),
        random(&[d_out], 32),
    );
    let run = |fused: bool, dtype: FloatDType, transposed: bool| {
        let x = leaf(xs.clone(), [rows, d_in], &d);
        let w = if transposed {
            let t: Vec<f32> = (0..d_out * d_in)
                .map(|k| ws[(k % d_in) * d_out + k / d_in])
                .collect();
            leaf(t, [d_out, d_in], &d)
        } else {
            leaf(ws.clone(), [d_in, d_out], &d)
        };
        let b = leaf(bs.clone(), [d_out], &d);
        let wv = if transposed {
            w.clone().transpose()
        } else {
            w.clone()
        };
        let (xc, wc, bc) = (x.clone().cast(dtype), wv.cast(dtype), b.clone().cast(dtype));
        let y = if fused {
            kernels::linear::torch_call(xc, wc, bc)
        } else {
            xc.matmul(wc) + bc.unsqueeze::<2>()
        }
        .cast(FloatDType::F32);
        let grads = weighted(y.clone(), 33).backward();
        let dw = w.grad(&grads).unwrap();
        let dw = if transposed { dw.transpose() } else { dw };
        (
            vec_of(y),
            vec_of(x.grad(&grads).unwrap()),
            vec_of(dw),
            vec_of(b.grad(&grads).unwrap()),
        )
    };
    for (dtype, tol) in [(FloatDType::F32, 1e-5), (FloatDType::BF16, 2e-2)] {
        for transposed in [false, true] {
            let (y, dx, dw, db) = run(true, dtype, transposed);
            let (ry, rdx, rdw, rdb) = run(false, dtype, transposed);
            let what = format!("{dtype:?}, transposed {transposed}");
            assert_close(&format!("x W + b ({what})"), &y, &ry, tol);
            assert_close(&format!("∂x ({what})"), &dx, &rdx, tol);
            assert_close(&format!("∂W ({what})"), &dw, &rdw, tol);
            assert_close(&format!("∂b ({what})"), &db, &rdb, tol);
        }
    }
}

#[test]
fn layer_norm_matches_the_composed_operations() {
    let d = device();
    let (rows, width, eps) = (10, 24, 1e-12);
    let xs = random(&[rows, width], 5);
    let gs: Vec<f32> = random(&[width], 6).iter().map(|v| 1.0 + v / 4.0).collect();
    let bs = random(&[width], 7);
    let run = |fused: bool| {
        let x = leaf(xs.clone(), [rows, width], &d);
        let gamma = leaf(gs.clone(), [width], &d);
        let beta = leaf(bs.clone(), [width], &d);
        let y = if fused {
            kernels::layer_norm::torch_call(x.clone(), gamma.clone(), beta.clone(), eps)
        } else {
            let mean = x.clone().mean_dim(1);
            let centred = x.clone() - mean;
            let var = centred.clone().square().mean_dim(1);
            centred / (var + eps).sqrt() * gamma.clone().unsqueeze::<2>()
                + beta.clone().unsqueeze::<2>()
        };
        let grads = weighted(y.clone(), 8).backward();
        (
            vec_of(y),
            vec_of(x.grad(&grads).unwrap()),
            vec_of(gamma.grad(&grads).unwrap()),
            vec_of(beta.grad(&grads).unwrap()),
        )
    };
    let (y, dx, dg, db) = run(true);
    let (ry, rdx, rdg, rdb) = run(false);
    assert_close("LayerNorm", &y, &ry, 1e-5);
    assert_close("∂x", &dx, &rdx, 1e-4);
    assert_close("∂γ", &dg, &rdg, 1e-4);
    assert_close("∂β", &db, &rdb, 1e-5);
}

#[test]
fn gelu_matches_burns() {
    let d = device();
    let xs = random(&[6, 40], 9);
    let run = |fused: bool| {
        let x = leaf(xs.clone(), [6, 40], &d);
        let y = if fused {
            kernels::gelu::torch_call(x.clone())
        } else {
            gelu(x.clone())
        };
        let g = x.grad(&weighted(y.clone(), 10).backward()).unwrap();
        (vec_of(y), vec_of(g))
    };
    let (y, g) = run(true);
    let (ry, rg) = run(false);
    assert_close("gelu", &y, &ry, 1e-6);
    assert_close("gelu'", &g, &rg, 1e-5);
}

#[test]
fn cross_entropy_matches_the_composed_operations() {
    let d = device();
    let (n, vocab) = (9, 30);
    let zs: Vec<f32> = random(&[n, vocab], 11).iter().map(|v| v * 4.0).collect();
    let labels: Vec<i64> = (0..n as i64).map(|i| (i * 7) % vocab as i64).collect();
    let labels = Tensor::<1, Int>::from_data(TensorData::new(labels, [n]), &d);
    let run = |fused: bool| {
        let z = leaf(zs.clone(), [n, vocab], &d);
        let nll = if fused {
            kernels::cross_entropy::torch_call(z.clone(), labels.clone())
        } else {
            -log_softmax(z.clone(), 1)
                .gather(1, labels.clone().unsqueeze_dim(1))
                .squeeze_dim::<1>(1)
        };
        let g = z.grad(&weighted(nll.clone(), 12).backward()).unwrap();
        (vec_of(nll), vec_of(g))
    };
    let (nll, g) = run(true);
    let (rnll, rg) = run(false);
    assert!(nll.iter().all(|&v| v > 0.0));
    assert_close("nll", &nll, &rnll, 1e-5);
    assert_close("∂z", &g, &rg, 1e-5);
}

/// bf16 operands in, bf16 context out, within bf16's precision of the f32 result; the gradient
/// comes back in the operands' dtype.
#[test]
fn attention_runs_in_bf16() {
    let d = device();
    let values = random(&[B, L, 3 * H], 13);
    let f32_ctx = vec_of(kernels::attention::torch_call(
        leaf(values.clone(), [B, L, 3 * H], &d),
        Some(padding(&d)),
        HEADS,
        0.0,
    ));
    let x = leaf(values.clone(), [B, L, 3 * H], &d);
    let y = kernels::attention::torch_call(
        x.clone().cast(FloatDType::BF16),
        Some(padding(&d)),
        HEADS,
        0.0,
    );
    assert_eq!(y.dtype(), burn::tensor::DType::BF16);
    let g = x.grad(&weighted(y.clone().cast(FloatDType::F32), 14).backward());
    let g = g.expect("a gradient through the cast");
    assert_eq!(g.dtype(), burn::tensor::DType::F32);
    assert_close("bf16 context", &vec_of(y), &f32_ctx, 2e-2);
}

/// Dropout: the rate, the scale `1 / (1 − p)`, a gradient that is the same mask, and the same
/// mask again after re-seeding.
#[test]
fn dropout_has_the_rate_and_scale_and_its_gradient_is_the_mask() {
    let _turn = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let d = device();
    let n = 1 << 16;
    let xs: Vec<f32> = random(&[n], 15).iter().map(|v| v + 3.0).collect();
    let run = || {
        trueneg::model::seed(&d, 5);
        let x = leaf(xs.clone(), [n], &d);
        let y = kernels::dropout::torch_call(x.clone(), 0.25);
        let g = x.grad(&y.clone().sum().backward()).unwrap();
        (vec_of(y), vec_of(g))
    };
    let (y, g) = run();
    let dropped = y.iter().filter(|&&v| v == 0.0).count() as f64 / n as f64;
    // 3 σ of a binomial(2¹⁶, 0.25) share is 0.005.
    assert!((dropped - 0.25).abs() < 0.005, "dropped {dropped}");
    let scale = 1.0 / 0.75f32;
    for ((&x, &y), &g) in xs.iter().zip(&y).zip(&g) {
        if y == 0.0 {
            assert_eq!(g, 0.0, "a dropped position gets no gradient");
        } else {
            assert!(
                (y - x * scale).abs() < 1e-5 * y.abs(),
                "kept value {y} of {x}"
            );
            assert!((g - scale).abs() < 1e-6, "kept position's gradient {g}");
        }
    }
    assert_eq!(run().0, y, "the same seed gives the same mask");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Pre-training on LibTorch with dropout on (its masks drawn by LibTorch's generator, inside
/// the attention kernel and by `native_dropout`) resumes exactly: the run's folder cut back to
/// its step-6 checkpoint and resumed repeats steps 7–12 of the uninterrupted run.
#[test]
fn a_libtorch_run_resumed_from_a_checkpoint_repeats_its_curve() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    common::ok(
        common::pretrain_cmd(&a, &["train.device=libtorch"])
            .output()
            .unwrap(),
    );
    let full = common::losses(&a);
    assert_eq!(full.len(), 12);
    assert!(full.iter().all(|(_, l, g)| l.is_finite() && *g > 0.0));

    let b = dir.path().join("b");
    copy_dir(&a, &b);
    for step in [9, 12] {
        std::fs::remove_dir_all(b.join(format!("checkpoints/step-{step:08}"))).unwrap();
    }
    common::ok(common::resume_cmd(&b).output().unwrap());
    assert_eq!(
        common::losses(&b),
        full,
        "resumed curve = uninterrupted curve"
    );
}

/// The self synonym table from the same embeddings: the device's top-k (LibTorch) keeps the
/// pairs the host's selection keeps.
#[test]
fn the_self_table_on_the_libtorch_device_equals_the_hosts() {
    use trueneg::text::self_synonyms::SelfSynonyms;
    let (rows, dim) = (300, 16);
    let values = random(&[rows, dim], 7);
    let build = SelfSynonyms {
        k: 4,
        threshold: 0.2,
        stop_words: Default::default(),
    };
    let candidates: Vec<u32> = (5..rows as u32).collect();
    let pairs = |device: &Device| {
        let e = Tensor::<2>::from_data(TensorData::new(values.clone(), [rows, dim]), device);
        let mut p = build.pairs(e, &candidates);
        p.sort_unstable();
        p
    };
    let host = pairs(&trueneg::device::host());
    assert!(host.len() > 100);
    assert_eq!(pairs(&device()), host);
}

/// Fine-tuning on the LibTorch device (the GPU path's code, here on LibTorch's CPU device or
/// the one `TRUENEG_LIBTORCH_DEVICE` names), in bf16 with gradient accumulation, for GLUE and
/// for SQuAD's joint head: trains, scores and records its settings.
#[test]
fn fine_tuning_runs_on_the_libtorch_device_in_bf16_with_accumulation() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::transformers_folder(dir.path(), "electra_discriminator");
    let device = std::env::var("TRUENEG_LIBTORCH_DEVICE").unwrap_or("libtorch".into());
    for (task, data) in [
        ("rte", common::data("glue/RTE")),
        ("squad", common::data("squad-v1.1/dev-half-a.json")),
    ] {
        let out = dir.path().join(task);
        common::ok(
            common::bin()
                .args(["finetune", "--task", task, "--data"])
                .arg(&data)
                .arg("--model")
                .arg(&model)
                .arg("--out")
                .arg(&out)
                .args(["--device", &device, "--precision", "bf16"])
                .args(["--grad-accum", "2", "--batch-size", "8", "--epochs", "1"])
                .args(["--max-train-examples", "32", "--max-seq-len", "32"])
                .args(["--max-eval-examples", "16", "--doc-stride", "16"])
                .output()
                .unwrap(),
        );
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap())
                .unwrap();
        assert_eq!(r["options"]["precision"], "bf16", "{task}: {r}");
        assert_eq!(r["options"]["grad_accum"], 2, "{task}: {r}");
        assert!(r["per_seed"][0]["score"].as_f64().is_some(), "{task}: {r}");
    }
}

/// The operation counter (`bench --count-ops`) sees each LibTorch call of a small computation
/// once (a dtype cast as one operation, a product as a kernel whatever view-like calls it makes
/// inside), counts the calls made into LibTorch apart, and sees the casts that mixed precision
/// adds to the ELECTRA step.
#[test]
fn the_operation_counter_sees_each_libtorch_call() {
    use trueneg::kernels::op_count::{self, CAST};
    let d = device();
    let a = Tensor::<2>::from_data(TensorData::new(random(&[4, 5], 1), [4, 5]), &d);
    let b = Tensor::<2>::from_data(TensorData::new(random(&[5, 3], 2), [5, 3]), &d);
    let (y, ops) = op_count::count(|| a.matmul(b).cast(FloatDType::BF16).sum()).unwrap();
    assert_eq!(y.dims(), [1]);
    assert_eq!(ops.of(CAST), 1, "{:?}", ops.by_name);
    // burn's three calls (and a reshape of the sum), not the calls LibTorch makes inside them.
    assert!((3..=6).contains(&ops.calls), "{} calls", ops.calls);
    assert_eq!(
        ops.of("aten::mm") + ops.of("aten::bmm"),
        1,
        "{:?}",
        ops.by_name
    );
    // The product is a kernel although LibTorch makes view-like calls inside it (on the CPU,
    // `resolve_conj`), which launch none.
    assert!(ops.launches("aten::mm") || ops.launches("aten::bmm"));
    assert!(
        ops.by_name
            .iter()
            .all(|(n, _)| !n.contains("resolve_conj") || !ops.launches(n))
    );

    let step = |precision| {
        let spec = trueneg::bench::BenchSpec {
            model: trueneg::train::config::ModelKind::Electra,
            layers: 1,
            batch: 1,
            precision,
            multi_tensor: trueneg::train::optimizer::MultiTensor::On,
            sync_phases: false,
            cuda_graph: false,
            count_ops: true,
            trial: false,
        };
        let kinds = [trueneg::objective::ObjectiveKind::parse("hc").unwrap()];
        let r = trueneg::bench::run_bench(&d, &spec, 1, 1, &kinds, |_, _, _, _, _| {});
        r.unwrap()
            .remove(0)
            .ops
            .expect("the first timed step's operations")
    };
    let (f32, bf16) = (
        step(trueneg::model::Precision::F32),
        step(trueneg::model::Precision::Bf16),
    );
    assert!(f32.launching() > 100, "{:?}", f32.by_name);
    assert!(
        bf16.of(CAST) > f32.of(CAST) + 20,
        "f32 {:?}\nbf16 {:?}",
        f32.by_name,
        bf16.by_name
    );
}

/// The backward pass of LayerNorm and attention launches their own backward kernels and no
/// others: LayerNorm's is not recorded again (no second forward kernel), no scalar
/// `Σ y ⊙ ∂y` is built to start LibTorch's autograd from (a product, a sum, a tensor of ones
/// and their backward kernels), and attention's query, key and value gradients are stacked in
/// one kernel, not each written into a zero-filled copy of `qkv` and added up.
#[test]
fn layer_norm_and_attention_backward_passes_launch_only_their_own_kernels() {
    use trueneg::kernels::op_count;
    let d = device();
    let (rows, width) = (10, 24);
    let x = leaf(random(&[rows, width], 5), [rows, width], &d);
    let gamma = leaf(random(&[width], 6), [width], &d);
    let beta = leaf(random(&[width], 7), [width], &d);
    let y = kernels::layer_norm::torch_call(x.clone(), gamma.clone(), beta.clone(), 1e-12);
    let loss = y.sum();
    let (grads, ops) = op_count::count(|| loss.backward()).unwrap();
    assert!(x.grad(&grads).is_some() && gamma.grad(&grads).is_some());
    assert!(beta.grad(&grads).is_some());
    // Before: a second LayerNorm, `y ⊙ ∂y` and its backward product: 9 launches here, 4 now.
    assert_eq!(ops.of("aten::native_layer_norm"), 0, "{:?}", ops.by_name);
    assert_eq!(ops.of("aten::mul"), 0, "{:?}", ops.by_name);
    assert!(ops.launching() <= 5, "{:?}", ops.by_name);

    let qkv = leaf(random(&[B, L, 3 * H], 1), [B, L, 3 * H], &d);
    let ctx = kernels::attention::torch_call(qkv.clone(), Some(padding(&d)), HEADS, 0.0);
    let loss = ctx.sum();
    let (grads, ops) = op_count::count(|| loss.backward()).unwrap();
    assert!(qkv.grad(&grads).is_some());
    // Before: three zero-filled copies of `qkv` added up, and the scalar's product: 19
    // launches here, 8 now.
    assert_eq!(ops.of("aten::add_"), 0, "{:?}", ops.by_name);
    assert_eq!(ops.of("aten::mul"), 0, "{:?}", ops.by_name);
    assert_eq!(
        ops.of("aten::cat"),
        1,
        "the stacked gradients: {:?}",
        ops.by_name
    );
    assert!(ops.launching() <= 10, "{:?}", ops.by_name);
}

/// Under bf16 the parameters that are slices of the optimizer's flat buffer are cast with one
/// kernel for all of them (`kernels::param_cast`): the same values and gradients as each
/// parameter's own cast; cast again after a new buffer is registered or the casts go stale; a
/// tensor outside the buffer (or not contiguous in it) is cast on its own.
#[test]
fn bf16_parameters_are_slices_of_one_cast_of_their_flat_buffer() {
    use trueneg::kernels::op_count::{self, CAST};
    use trueneg::kernels::param_cast::{self, FlatParams};
    let d = device();
    let bf16 = FloatDType::BF16;
    let flat_of = |seed| Tensor::<1>::from_data(TensorData::new(random(&[60], seed), [60]), &d);
    // Three parameters laid out in the buffer as the optimizer leaves them.
    let params = |flat: &Tensor<1>| {
        [(0, [4, 6]), (24, [3, 8]), (48, [2, 6])].map(|(at, [r, c])| {
            flat.clone()
                .slice(at..at + r * c)
                .reshape([r, c])
                .detach()
                .require_grad()
        })
    };
    let flat = flat_of(21);
    let casts = FlatParams::default();
    casts.set(&flat);
    let ws = params(&flat);
    let (cast, ops) = op_count::count(|| ws.clone().map(|w| kernels::param_cast(w, bf16))).unwrap();
    assert_eq!(ops.of(CAST), 1, "one cast for three: {:?}", ops.by_name);
    // Values and gradients: those of each parameter's own cast.
    let loss = |ys: [Tensor<2>; 3]| {
        ys.into_iter()
            .enumerate()
            .map(|(i, y)| weighted(y.cast(FloatDType::F32), 30 + i as u64))
            .reduce(|a, b| a + b)
            .unwrap()
    };
    for (y, w) in cast.iter().zip(&ws) {
        assert_eq!(y.dtype(), burn::tensor::DType::BF16);
        assert_eq!(vec_of(y.clone()), vec_of(w.clone().cast(bf16)));
    }
    let grads = loss(cast).backward();
    let own = params(&flat);
    let grads_own = loss(own.clone().map(|w| w.cast(bf16))).backward();
    for (w, o) in ws.iter().zip(&own) {
        let (g, g_own) = (w.grad(&grads).unwrap(), o.grad(&grads_own).unwrap());
        assert_eq!(g.dtype(), burn::tensor::DType::F32);
        assert_eq!(vec_of(g), vec_of(g_own));
    }

    // The casts are kept until the parameters change: none more for a second use.
    let (_, ops) = op_count::count(|| kernels::param_cast(ws[1].clone(), bf16)).unwrap();
    assert_eq!(ops.of(CAST), 0, "{:?}", ops.by_name);
    // A new buffer (the next update): cast again, the new values.
    let flat = flat_of(22);
    casts.set(&flat);
    let ws = params(&flat);
    let (y, ops) = op_count::count(|| kernels::param_cast(ws[2].clone(), bf16)).unwrap();
    assert_eq!(ops.of(CAST), 1, "{:?}", ops.by_name);
    assert_eq!(vec_of(y), vec_of(ws[2].clone().cast(bf16)));
    // Rewritten in place (a replayed recorded step): stale, cast again.
    param_cast::stale();
    let (_, ops) = op_count::count(|| kernels::param_cast(ws[0].clone(), bf16)).unwrap();
    assert_eq!(ops.of(CAST), 1, "{:?}", ops.by_name);

    // Not contiguous in the buffer, or outside it, or the buffer unregistered: its own cast.
    let transposed = ws[0].clone().transpose();
    let outside = leaf(random(&[4, 6], 23), [4, 6], &d);
    for (w, what) in [(transposed, "transposed"), (outside, "outside")] {
        let (y, ops) = op_count::count(|| kernels::param_cast(w.clone(), bf16)).unwrap();
        assert_eq!(ops.of(CAST), 1, "{what}: {:?}", ops.by_name);
        assert_eq!(vec_of(y), vec_of(w.cast(bf16)), "{what}");
    }
    drop(casts);
    let (_, ops) = op_count::count(|| ws.clone().map(|w| kernels::param_cast(w, bf16))).unwrap();
    assert_eq!(ops.of(CAST), 3, "unregistered: {:?}", ops.by_name);
    // f32 parameters in f32: no call at all.
    let (_, ops) = op_count::count(|| kernels::param_cast(ws[0].clone(), FloatDType::F32)).unwrap();
    assert_eq!(ops.launching(), 0, "{:?}", ops.by_name);
}
