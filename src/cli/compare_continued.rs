//! `trueneg compare-continued`: baseline vs another objective continued from one run,
//! fine-tuned on the counterfactual sentiment task, scored on contrast consistency and Hits,
//! over seeds.

use std::path::PathBuf;

use trueneg::eval::hits::{read_sentences, triplet};
use trueneg::experiments::compare_continued::{CompareOptions, compare};
use trueneg::objective::ObjectiveKind;
use trueneg::tasks::glue::GlueTask;

use trueneg::frame::{Claim, FileKind, InputKind, OutputKind, Owned, Plan};

use super::Ui;

#[derive(clap::Args)]
pub struct Args {
    /// The trueneg run both arms continue from (pre-trained on a prepared corpus).
    #[arg(long)]
    base_run: PathBuf,
    /// The objective the compared arm continues with (`objective.kind`).
    #[arg(long, value_parser = super::objective_kind)]
    objective: ObjectiveKind,
    /// The compared arm's corpus, prepared with the base run's tokenizer (`prepare --triples`
    /// for an objective on sentence triples) [default: the base run's corpus].
    #[arg(long)]
    data: Option<PathBuf>,
    /// Steps of continued pre-training in each arm.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Override a config value of both arms, e.g. --set optimizer.lr=1e-4 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Comma-separated pre-training seeds.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pretrain_seeds: Vec<u64>,
    /// Comma-separated fine-tuning seeds.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    finetune_seeds: Vec<u64>,
    /// The cad-sentiment folder to fine-tune on (train.tsv, dev.tsv: `orig` or `combined`).
    #[arg(long)]
    task_data: PathBuf,
    /// The contrast set (e.g. …/counterfactual/sentiment/combined/paired/dev_paired.tsv).
    #[arg(long)]
    contrast: PathBuf,
    /// The split of a contrast folder.
    #[arg(long, default_value = "dev")]
    split: String,
    /// Sentences for Hits: a text file or a .tsv with a `sentence` column (SST-2 dev).
    #[arg(long)]
    hits_sentences: PathBuf,
    /// Use at most this many Hits triplets.
    #[arg(long, default_value_t = 200, value_parser = super::at_least(1))]
    hits_max: usize,
    #[command(flatten)]
    recipe: super::finetune::RecipeArgs,
    /// WordNet database folder (Hits triplets) [default: /usr/share/wordnet].
    #[arg(long)]
    wordnet: Option<PathBuf>,
    /// Folder of the comparison (runs, fine-tuned models, report); an unfinished one continues.
    #[arg(long)]
    out: PathBuf,
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        super::set_owned_by(&self.set, "objective.kind", "--objective")?;
        super::set_owned_by(&self.set, "train.steps", "--steps")?;
        super::set_owned_by(&self.set, "train.seed", "--pretrain-seeds")?;
        super::set_owned_by(&self.set, "model.init_from", "--base-run")?;
        Ok(Plan::new("compare-continued")
            .input("--base-run", &self.base_run, InputKind::Run)
            .input_if("--data", self.data.as_ref(), InputKind::PreparedCorpus)
            .input("--task-data", &self.task_data, InputKind::TaskData)
            .input("--contrast", &self.contrast, InputKind::TaskData)
            .input(
                "--hits-sentences",
                &self.hits_sentences,
                InputKind::File(FileKind::Sentences),
            )
            .input_if("--wordnet", self.wordnet.as_ref(), InputKind::WordNet)
            .output("--out", &self.out, OutputKind::Folder)
            .stops_at_safe_points(&trueneg::stop::kept_in(&self.out)))
    }

    fn run(self: Box<Self>, claim: &Claim, ui: Ui) -> anyhow::Result<()> {
        run(*self, claim.folder("--out"), ui)
    }
}

fn run(a: Args, out: &Owned, ui: Ui) -> anyhow::Result<()> {
    let ft = a.recipe.options(GlueTask::named(
        trueneg::experiments::compare_continued::SENTIMENT_TASK,
    ));
    let wn = trueneg::lexicon::wordnet::WordNet::open(&super::wordnet_dir(&a.wordnet))?;
    let mut triplets: Vec<_> = read_sentences(&a.hits_sentences)?
        .iter()
        .enumerate()
        .filter_map(|(i, s)| triplet(s, &wn, 1, i as u64))
        .collect();
    triplets.truncate(a.hits_max);
    let (_, md) = compare(&CompareOptions {
        base_run: a.base_run,
        objective: a.objective,
        data: a.data,
        steps: a.steps,
        overrides: a.set,
        pretrain_seeds: a.pretrain_seeds,
        finetune_seeds: a.finetune_seeds,
        task_data: a.task_data,
        finetune: ft,
        contrast: a.contrast,
        split: a.split,
        triplets,
        out: out.clone(),
        progress: ui.progress,
    })
    .map_err(|e| trueneg::stop::continued_by_rerun(e, &a.out))?;
    print!("{md}");
    println!("wrote {}", a.out.join("report.md").display());
    Ok(())
}
