//! `trueneg inspect`: what Hard Correction corrects in one checkpoint of a run
//! (`eval::inspect`), written beside the run's other reports: `inspect-step-N.tsv` (the
//! sampled positions), `.md` (the page a person reads) and `.json` (everything).

use std::path::PathBuf;

use trueneg::eval::inspect::{InspectRequest, inspect, page, sample_tsv};
use trueneg::frame::{Claim, FileKind, InputKind, OutputKind, Plan};
use trueneg::io::outputs::Outputs;
use trueneg::train::stats::ProbeRequest;

#[derive(clap::Args)]
pub struct Args {
    /// The run folder.
    #[arg(long)]
    run: PathBuf,
    /// The checkpoint's step [default: the latest].
    #[arg(long)]
    step: Option<u64>,
    /// Text corpus to mask and predict (e.g. ../shared/data/wikitext-2/wiki.test.raw), or
    /// shards `prepare` wrote with the run's tokenizer.
    #[arg(long)]
    corpus: PathBuf,
    /// Synonym table [default: the checkpoint's own (a self-table run's), else the run's
    /// lexicon.safetensors, else WordNet].
    #[arg(long)]
    lexicon: Option<PathBuf>,
    /// WordNet database folder, for the parts of speech [default: /usr/share/wordnet].
    #[arg(long)]
    wordnet: Option<PathBuf>,
    /// Batches of the corpus masked and predicted.
    #[arg(long, default_value_t = 20, value_parser = super::at_least(1))]
    batches: usize,
    /// Sequences per batch.
    #[arg(long, default_value_t = 32, value_parser = super::at_least(1))]
    batch_size: usize,
    /// Masked positions written to the TSV and the page (a seeded sample).
    #[arg(long, default_value_t = 200, value_parser = super::at_least(1))]
    sample: usize,
    /// Seed of the masking, the sampled predictions and the sample: the same seed, the same
    /// page.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Replace inspect files of this step that another command (or a person) wrote.
    #[arg(long)]
    force: bool,
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        Ok(Plan::new("inspect")
            .input("--run", &self.run, InputKind::Run)
            .input("--corpus", &self.corpus, InputKind::Corpus)
            .input_if(
                "--lexicon",
                self.lexicon.as_ref(),
                InputKind::File(FileKind::Lexicon),
            )
            .input_if("--wordnet", self.wordnet.as_ref(), InputKind::WordNet)
            .output("--run", &self.run, OutputKind::ReportsIn)
            .force(self.force))
    }

    fn run(self: Box<Self>, claim: &Claim, _: super::Ui) -> anyhow::Result<()> {
        run(*self, claim.outputs())
    }
}

fn run(a: Args, outputs: &Outputs) -> anyhow::Result<()> {
    let run = &a.run;
    trueneg::train::run::run_model(run)?;
    let tok = trueneg::train::run::run_tokenizer(run)?;
    let wordnet_dir = super::wordnet_dir(&a.wordnet);
    // WordNet is opened once: for the parts of speech, and for the table when it is WordNet's.
    let wordnet = trueneg::lexicon::WordNet::open(&wordnet_dir)?;
    let given = a.lexicon.is_some();
    let table = super::run_synonym_table(run, a.lexicon, &tok, || {
        Ok(trueneg::text::synonym_table::wordnet_table_from(
            &tok,
            &wordnet,
            &wordnet_dir,
        ))
    })?;
    let table = trueneg::train::stats::JudgingTable { table, given };
    let request = InspectRequest {
        probe: ProbeRequest {
            run,
            corpus: &a.corpus,
            tables: &table,
            batch_size: a.batch_size,
            max_batches: a.batches,
            seed: a.seed,
            what: "inspect",
            kinds: trueneg::train::steps::kind_of,
        },
        step: a.step,
        wordnet: &wordnet,
        sample: a.sample,
    };
    let files =
        |step: u64| ["tsv", "md", "json"].map(|e| run.join(format!("inspect-step-{step}.{e}")));
    if let Some(step) = a.step {
        outputs.check(&files(step))?;
    }
    let inspection = inspect(&request)?;
    let [tsv, md, json] = files(inspection.step);
    outputs.check(&[tsv.clone(), md.clone(), json.clone()])?;
    outputs.write(&tsv, sample_tsv(&inspection).as_bytes())?;
    outputs.write(&md, page(&inspection).as_bytes())?;
    outputs.write_json(&json, &inspection)?;
    let t = &inspection.total;
    println!(
        "step {}: {} masked, {} mismatched, {} corrected ({:.1} % of the mismatched) -> {}",
        inspection.step,
        t.masked,
        t.mismatched,
        t.corrected,
        100.0 * t.corrected as f64 / t.mismatched.max(1) as f64,
        md.display()
    );
    Ok(())
}
