//! GLUE and SQuAD in the Hub's Parquet layout, as the `datasets` library writes them
//! (scripts/hub_parquet.py, run here with the Python that has `datasets`): every example reads
//! as the official files' (texts, labels by name, ids), MNLI's labels in the Hub's order map
//! onto the task's, and `finetune` takes the parent `glue/` folder with `--task`.

use crate::common;
use common::{SHORT_FINETUNE, data, finetune_cmd, ok, pretrained_tiny};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use trueneg::tasks::glue::{GlueTask, Label, read_glue};

/// The layout written once by `datasets` (None, with a note, without it).
fn hub() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let python = common::python_with("datasets")?;
        let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/tmp/hub-parquet");
        let _ = std::fs::remove_dir_all(&out);
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/hub_parquet.py");
        let o = std::process::Command::new(python)
            .arg(script)
            .arg(data(""))
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        Some(out)
    })
    .as_deref()
}

#[test]
fn glue_splits_in_parquet_read_as_the_official_files() {
    let Some(hub) = hub() else { return };
    for (task, official, name) in [
        (GlueTask::named("rte"), "RTE", "rte"),
        (GlueTask::named("sst2"), "SST-2", "sst2"),
        (GlueTask::named("stsb"), "STS-B", "stsb"),
    ] {
        let (ours, theirs) = (
            data(&format!("glue/{official}")),
            hub.join("glue").join(name),
        );
        for (a, b) in [
            (task.train_file(&ours), task.train_file(&theirs)),
            (
                task.dev_files(&ours)[0].clone(),
                task.dev_files(&theirs)[0].clone(),
            ),
        ] {
            assert!(b.to_string_lossy().ends_with(".parquet"), "{}", b.display());
            let (tsv, parquet) = (read_glue(task, &a).unwrap(), read_glue(task, &b).unwrap());
            assert_eq!(tsv.len(), parquet.len(), "{}", b.display());
            for (x, y) in tsv.iter().zip(&parquet) {
                assert_eq!((&x.text_a, &x.text_b, &x.id), (&y.text_a, &y.text_b, &y.id));
                match (x.label, y.label) {
                    (Some(Label::Score(p)), Some(Label::Score(q))) => {
                        assert!((p - q).abs() < 1e-6, "{p} {q}")
                    }
                    (p, q) => assert_eq!(p, q, "{}", b.display()),
                }
            }
        }
    }
}

#[test]
fn mnlis_hub_label_order_maps_onto_the_tasks_labels() {
    let Some(hub) = hub() else { return };
    let dir = hub.join("glue/mnli");
    let dev = GlueTask::named("mnli").dev_files(&dir);
    assert_eq!(dev.len(), 2, "{dev:?}");
    let rows = read_glue(GlueTask::named("mnli"), &dev[1]).unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| match r.label {
            Some(Label::Class(c)) => GlueTask::named("mnli").labels()[c],
            other => panic!("{other:?}"),
        })
        .collect();
    // The script's made-up pairs, in its order.
    assert_eq!(
        names,
        [
            "entailment",
            "contradiction",
            "neutral",
            "entailment",
            "contradiction",
            "neutral"
        ]
    );
    assert_eq!(
        trueneg::tasks::hub_layout::glue_stem(&dev[1]),
        "dev_mismatched"
    );
}

#[test]
fn squad_in_parquet_reads_as_its_json() {
    let Some(hub) = hub() else { return };
    let (train, dev) = trueneg::finetune::seeds::squad_splits(&hub.join("squad"), 0, 0).unwrap();
    let json = trueneg::tasks::squad::read_squad(&data("squad-v1.1/dev-half-a.json")).unwrap();
    assert_eq!((train.len(), dev.len()), (100, 50));
    assert_eq!(train[..], json[..100]);
    assert_eq!(dev[..], json[100..150]);
}

#[test]
fn finetune_reads_the_parent_glue_folder_in_parquet() {
    let Some(hub) = hub() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny(dir.path());
    let out = dir.path().join("ft");
    let said = ok(finetune_cmd("rte", &hub.join("glue"), &run, &out)
        .arg("--quiet")
        .args(SHORT_FINETUNE)
        .output()
        .unwrap());
    assert!(said.contains("validation-00000-of-00001.parquet"), "{said}");
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["examples"]["dev"], 277, "{r}");
    assert_eq!(r["examples"]["train"], 64, "{r}");
}
