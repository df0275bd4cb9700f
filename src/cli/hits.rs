//! `trueneg hits`: Hits (Wang et al. 2021, §4.6) of an encoder on synonym / antonym triplets.

use std::path::PathBuf;

use trueneg::eval::hits::{hits, hits_table, read_sentences, triplet};
use trueneg::frame::{Claim, FileKind, InputKind, OutputKind, Plan};
use trueneg::io::outputs::Outputs;

#[derive(clap::Args)]
pub struct Args {
    /// A trueneg run folder or a transformers folder.
    #[arg(long)]
    model: PathBuf,
    /// Sentences: a text file (one per line) or a .tsv with a `sentence` column (SST-2).
    #[arg(long)]
    sentences: PathBuf,
    /// Use at most this many triplets (0 = all).
    #[arg(long, default_value_t = 0)]
    max: usize,
    /// Seed of the word and replacement choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Triplets per forward pass.
    #[arg(long, default_value_t = 32, value_parser = super::at_least(1))]
    batch_size: usize,
    /// Tokens per sentence (at least 8).
    #[arg(long, default_value_t = 128, value_parser = super::at_least(8))]
    max_seq_len: usize,
    /// Also write hits.md and hits.json (with the triplets) into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
    /// WordNet database folder [default: Debian's wordnet-base, /usr/share/wordnet].
    #[arg(long)]
    wordnet: Option<PathBuf>,
    /// Replace hits.md / hits.json in --out even when `hits` did not write them.
    #[arg(long, requires = "out")]
    force: bool,
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        let mut plan = Plan::new("hits")
            .input("--model", &self.model, InputKind::Encoder)
            .input(
                "--sentences",
                &self.sentences,
                InputKind::File(FileKind::Sentences),
            )
            .input_if("--wordnet", self.wordnet.as_ref(), InputKind::WordNet)
            .force(self.force);
        if let Some(out) = &self.out {
            plan = plan.output("--out", out, OutputKind::FilesIn);
        }
        Ok(plan)
    }

    fn run(self: Box<Self>, claim: &Claim, _: super::Ui) -> anyhow::Result<()> {
        run(*self, claim.outputs())
    }
}

fn run(a: Args, outputs: &Outputs) -> anyhow::Result<()> {
    let files = a
        .out
        .as_ref()
        .map(|o| [o.join("hits.md"), o.join("hits.json")]);
    if let Some(files) = &files {
        outputs.check(files)?;
    }
    let wn = trueneg::lexicon::wordnet::WordNet::open(&super::wordnet_dir(&a.wordnet))?;
    let sentences = read_sentences(&a.sentences)?;
    let mut triplets: Vec<_> = sentences
        .iter()
        .enumerate()
        .filter_map(|(i, s)| triplet(s, &wn, a.seed, i as u64))
        .collect();
    if a.max > 0 {
        triplets.truncate(a.max);
    }
    if triplets.is_empty() {
        anyhow::bail!(
            "{}: no sentence has a word with both a WordNet synonym and antonym",
            a.sentences.display()
        );
    }
    let pre = trueneg::finetune::pretrained::load_pretrained(&a.model)?;
    // Sentences are cut to the model's positions: a longer one has no position embedding.
    let positions = pre.config.max_position_embeddings;
    if a.max_seq_len > positions {
        eprintln!(
            "note: --max-seq-len {} exceeds the model's {positions} positions: sentences are cut to {positions} tokens",
            a.max_seq_len
        );
    }
    let report = hits(&pre, &triplets, a.batch_size, a.max_seq_len.min(positions))?;
    let md = hits_table(&report);
    print!("{md}");
    if let Some([md_file, json_file]) = &files {
        let json = serde_json::json!({"report": report, "triplets": triplets});
        outputs.write(md_file, md.as_bytes())?;
        outputs.write_json(json_file, &json)?;
        println!("wrote {}", md_file.display());
    }
    Ok(())
}
