//! A new user's first mistakes, each answered in one line that says what to do: a parent data
//! folder is read as the task's folder, a mistyped path or key gets the near name, a task's
//! data given to another task names the task it fits, a fine-tuned model given as a run is
//! pointed to `--model`.

use crate::common;
use common::{
    SHORT_FINETUNE, bin, data, fails, finetune_cmd, finetuned_rte, ok, pretrain_cmd,
    pretrained_tiny, shards,
};

#[test]
fn the_glue_folder_with_a_task_reads_that_tasks_folder() {
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny(dir.path());
    let out = dir.path().join("ft");
    ok(finetune_cmd("rte", &data("glue"), &run, &out)
        .arg("--quiet")
        .args(SHORT_FINETUNE)
        .output()
        .unwrap());
    let settings: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("finetune.json")).unwrap()).unwrap();
    assert!(
        settings["data"].as_str().unwrap().ends_with("glue/RTE"),
        "{settings}"
    );
}

#[test]
fn a_mistyped_prepared_corpus_gets_the_near_name_and_the_command_that_makes_one() {
    let dir = tempfile::tempdir().unwrap();
    let typo = format!("{}x", shards().display());
    let e = fails(
        pretrain_cmd(&dir.path().join("run"), &[&format!("data.shards={typo}")])
            .output()
            .unwrap(),
    );
    assert!(
        e.contains(&format!("did you mean {}?", shards().display()))
            && e.contains("trueneg prepare --input <text> --out"),
        "{e}"
    );
}

#[test]
fn a_mistyped_set_key_is_blamed_on_the_set_with_the_near_key() {
    let dir = tempfile::tempdir().unwrap();
    let e = fails(
        pretrain_cmd(&dir.path().join("run"), &["train.stepz=5"])
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("--set train.stepz=5: field `train.stepz`")
            && e.contains("did you mean `steps`?")
            && !e.contains("preset"),
        "{e}"
    );
}

#[test]
fn another_tasks_data_names_the_task_it_fits() {
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny(dir.path());
    let e = fails(
        finetune_cmd("sst2", &data("glue/RTE"), &run, &dir.path().join("ft"))
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("no column `sentence`")
            && e.contains("index, sentence1, sentence2, label")
            && e.contains("fits --task rte"),
        "{e}"
    );
}

#[test]
fn a_fine_tuned_model_given_as_a_run_is_pointed_to_model() {
    let dir = tempfile::tempdir().unwrap();
    let seed = finetuned_rte(dir.path());
    let e = fails(
        bin()
            .args(["export", "--run"])
            .arg(&seed)
            .arg("--out")
            .arg(dir.path().join("hub"))
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("is a fine-tuned model")
            && e.contains(&format!("export --model {}", seed.display())),
        "{e}"
    );
}
