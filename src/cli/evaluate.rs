//! `trueneg evaluate`: a fine-tuned model on a dev set, optionally under an attack.

use std::path::PathBuf;

use trueneg::frame::{Claim, InputKind, OutputKind, Plan};
use trueneg::io::outputs::Outputs;

use super::Ui;

#[derive(clap::Args)]
pub struct Args {
    /// A fine-tuned model: a folder written by `finetune` (…/seed-N), or a transformers
    /// sequence-classification folder whose config.json names its `finetuning_task` (trueneg's
    /// export, run_glue's output), or the id of such a model in the local Hugging Face cache.
    #[arg(long)]
    model: PathBuf,
    /// The task's folder or a .tsv file (SQuAD: the JSON file).
    #[arg(
        long,
        required_unless_present = "contrast",
        conflicts_with = "contrast"
    )]
    data: Option<PathBuf>,
    /// Score contrast consistency (Ori / Rev / Con, Wang et al. 2021, Table 4) on a contrast set
    /// instead: the counterfactual sentiment pairs (`…/combined/paired/dev_paired.tsv`), the
    /// counterfactual NLI root, allenai's IMDb folder, BoolQ .json or PERSPECTRUM .csv.
    #[arg(long, conflicts_with = "attack")]
    contrast: Option<PathBuf>,
    /// The split of a contrast folder (NLI, IMDb): dev or test.
    #[arg(long, default_value = "dev")]
    split: String,
    /// Folder for the predictions (GLUE submission format; with --contrast, every example's
    /// prediction as contrast-<set>-predictions.tsv) and the attack table.
    #[arg(long)]
    out: PathBuf,
    /// Also evaluate under this attack (swap-syn-wordnet, add-sent-diverse) and report
    /// original → transformed scores and the drop.
    #[arg(long)]
    attack: Option<String>,
    /// Seed of the attack's random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// WordNet database folder [default: Debian's wordnet-base, /usr/share/wordnet].
    #[arg(long)]
    wordnet: Option<PathBuf>,
    /// SQuAD: evaluate on at most this many questions (0 = all).
    #[arg(long, default_value_t = 0)]
    max_eval_examples: usize,
    /// Device to predict on: cpu, or cuda / libtorch-cuda in a build with that feature.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Replace files in --out that `evaluate` did not write (another command's predictions).
    #[arg(long)]
    force: bool,
}

/// `scores.json` (with an attack: `scores-<attack>.json`) in `out`.
fn scores_file(out: &std::path::Path, attack: Option<trueneg::attack::AttackKind>) -> PathBuf {
    match attack {
        Some(k) => out.join(format!("scores-{}.json", k.name())),
        None => out.join("scores.json"),
    }
}

/// Writes each evaluated file's scores (none for a file without gold labels), its rate and
/// the predictions written, as JSON.
fn write_scores(
    outputs: &trueneg::io::outputs::Outputs,
    path: &std::path::Path,
    model: &std::path::Path,
    evaluations: &[trueneg::eval::evaluate::Evaluation],
) -> anyhow::Result<()> {
    let files: Vec<serde_json::Value> = evaluations
        .iter()
        .map(|e| {
            serde_json::json!({
                "file": e.file,
                "scores": e.scores,
                "examples_per_s": e.examples_per_s,
                "predictions": e.written,
            })
        })
        .collect();
    let json = serde_json::json!({ "model": model, "files": files });
    outputs.write_json(path, &json)?;
    println!("wrote {}", path.display());
    Ok(())
}

/// `--contrast`: the Table 4 row of this model, printed and written as contrast-<set>.md /
/// .json, with every example's prediction in contrast-<set>-predictions.tsv.
fn contrast(a: &Args, set: &std::path::Path, outputs: &Outputs, ui: Ui) -> anyhow::Result<()> {
    use trueneg::tasks::contrast::consistency_table;
    let run =
        trueneg::eval::evaluate::evaluate_contrast(&a.model, set, &a.split, &a.device, ui.bars())?;
    let kind_name = serde_json::to_value(run.kind)?
        .as_str()
        .unwrap_or("contrast")
        .to_string();
    let c = &run.scores;
    let md = consistency_table(&[(a.model.display().to_string(), kind_name.clone(), c.clone())]);
    let stem = format!("contrast-{kind_name}");
    let [md_file, json_file, predictions] =
        [".md", ".json", "-predictions.tsv"].map(|e| a.out.join(format!("{stem}{e}")));
    outputs.check(&[md_file.clone(), json_file.clone(), predictions.clone()])?;
    let json = serde_json::json!({
        "model": a.model, "set": set, "kind": run.kind, "split": a.split, "scores": c,
        "notes": run.notes,
    });
    let mut tsv = String::from("group\trole\tsource\tlabel\tpredicted\n");
    for p in &run.predictions {
        tsv += &format!(
            "{}\t{}\t{}\t{}\t{}\n",
            p.group, p.role, p.source, p.label, p.predicted
        );
    }
    outputs.write(&md_file, md.as_bytes())?;
    outputs.write_json(&json_file, &json)?;
    outputs.write(&predictions, tsv.as_bytes())?;
    for n in &run.notes {
        eprintln!("note: {n}");
    }
    print!("{md}");
    println!("wrote {} and {}", md_file.display(), predictions.display());
    Ok(())
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        trueneg::device::device_for(&self.device).map_err(|e| anyhow::anyhow!("--device: {e}"))?;
        let model = trueneg::interop::hub_cache::model_dir(&self.model)?;
        Ok(Plan::new("evaluate")
            .input("--model", &model, InputKind::FinetunedOrExport)
            .input_if("--data", self.data.as_ref(), InputKind::TaskData)
            .input_if("--contrast", self.contrast.as_ref(), InputKind::TaskData)
            .input_if("--wordnet", self.wordnet.as_ref(), InputKind::WordNet)
            .output("--out", &self.out, OutputKind::FilesIn)
            .force(self.force))
    }

    fn run(self: Box<Self>, claim: &Claim, ui: Ui) -> anyhow::Result<()> {
        // A model id of the local Hugging Face cache is its snapshot folder from here on.
        let mut a = *self;
        a.model = trueneg::interop::hub_cache::model_dir(&a.model)?;
        run(a, claim.outputs(), ui)
    }
}

fn run(a: Args, outputs: &Outputs, ui: Ui) -> anyhow::Result<()> {
    use trueneg::attack::files::attack_table;
    use trueneg::eval::evaluate::{Attack, EvalRequest, evaluate_model, evaluation_files};
    if let Some(set) = &a.contrast {
        return contrast(&a, set, outputs, ui);
    }
    let data = a.data.clone().expect("clap requires --data");
    // Every file this call writes is checked before the first is written.
    let kind = a
        .attack
        .as_deref()
        .map(super::attack::attack_kind)
        .transpose()?;
    let mut files = evaluation_files(&a.model, &data, &a.out, None)?;
    files.push(scores_file(&a.out, None));
    if let Some(k) = kind {
        files.extend(evaluation_files(&a.model, &data, &a.out, Some(k))?);
        files.push(a.out.join(format!("attack-{}.md", k.name())));
        files.push(scores_file(&a.out, Some(k)));
    }
    outputs.check(&files)?;
    let mut request = EvalRequest {
        model: &a.model,
        data: &data,
        out: &a.out,
        attack: None,
        max_eval: a.max_eval_examples,
        device: &a.device,
        progress: ui.bars(),
    };
    let original = evaluate_model(&request, outputs)?;
    for e in &original {
        if let Some(s) = &e.scores {
            println!(
                "{}: {} ({:.1} examples/s)",
                e.file.display(),
                s.line(),
                e.examples_per_s
            );
            for why in s.warnings() {
                eprintln!("warning: {}: {why}", e.file.display());
            }
        }
        println!("wrote {}", e.written.display());
    }
    write_scores(outputs, &scores_file(&a.out, None), &a.model, &original)?;
    let Some(kind) = kind else {
        return Ok(());
    };
    let wn = trueneg::lexicon::wordnet::WordNet::open(&super::wordnet_dir(&a.wordnet))?;
    request.attack = Some(Attack {
        kind,
        wordnet: &wn,
        seed: a.seed,
    });
    let attacked = evaluate_model(&request, outputs)?;
    write_scores(
        outputs,
        &scores_file(&a.out, Some(kind)),
        &a.model,
        &attacked,
    )?;
    let mut md = String::new();
    for (o, t) in original.iter().zip(&attacked) {
        if let (Some(os), Some(ts)) = (&o.scores, &t.scores) {
            md += &attack_table(kind.name(), os, ts);
        }
    }
    if md.is_empty() {
        anyhow::bail!("{}: no gold labels to compare under attack", data.display());
    }
    let path = a.out.join(format!("attack-{}.md", kind.name()));
    outputs.write(&path, md.as_bytes())?;
    print!("{md}");
    println!("wrote {}", path.display());
    Ok(())
}
