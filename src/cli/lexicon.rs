//! `trueneg lexicon build`: a synonym table (token id → synonym token ids) for a tokenizer.

use std::path::PathBuf;

use trueneg::frame::{Claim, FileKind, InputKind, OutputKind, Plan};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Build a synonym table (token id → synonym token ids) for a tokenizer.
    Build {
        /// tokenizer.json or vocab.txt.
        #[arg(long)]
        tokenizer: PathBuf,
        /// The table file to write (lexicon.safetensors); must not exist.
        #[arg(long)]
        out: PathBuf,
        /// WordNet database folder [default: /usr/share/wordnet].
        #[arg(long)]
        wordnet: Option<PathBuf>,
        /// Use top-k neighbours from word vectors (word2vec text/binary or GloVe) instead.
        #[arg(long, conflicts_with_all = ["wordnet", "checkpoint"])]
        embeddings: Option<PathBuf>,
        /// Use top-k neighbours in a checkpoint's own token embeddings (a model.safetensors,
        /// e.g. runs/tiny/checkpoints/step-00000200/model.safetensors): the model's own
        /// synonyms, trueneg's extension of the paper.
        #[arg(long, conflicts_with = "wordnet")]
        checkpoint: Option<PathBuf>,
        /// Neighbours per word with --embeddings / --checkpoint.
        #[arg(long, default_value_t = 10, value_parser = super::at_least(1))]
        top_k: usize,
        /// With --checkpoint: keep a neighbour only at this cosine or above [default: any].
        #[arg(long, requires = "checkpoint", allow_hyphen_values = true)]
        min_cosine: Option<f32>,
        /// With --checkpoint: a file of words (one per line) left out of the table.
        #[arg(long, requires = "checkpoint")]
        stop_words: Option<PathBuf>,
    },
}

impl super::Command for Command {
    fn plan(&self) -> anyhow::Result<Plan> {
        let Command::Build {
            tokenizer,
            out,
            wordnet,
            embeddings,
            checkpoint,
            stop_words,
            ..
        } = self;
        Ok(Plan::new("lexicon build")
            .input(
                "--tokenizer",
                tokenizer,
                InputKind::File(FileKind::Tokenizer),
            )
            .input_if("--wordnet", wordnet.as_ref(), InputKind::WordNet)
            .input_if(
                "--embeddings",
                embeddings.as_ref(),
                InputKind::File(FileKind::Vectors),
            )
            .input_if(
                "--checkpoint",
                checkpoint.as_ref(),
                InputKind::File(FileKind::Checkpoint),
            )
            .input_if(
                "--stop-words",
                stop_words.as_ref(),
                InputKind::File(FileKind::StopWords),
            )
            .output("--out", out, OutputKind::File))
    }

    fn run(self: Box<Self>, claim: &Claim, _: super::Ui) -> anyhow::Result<()> {
        run(*self, claim.outputs())
    }
}

/// Builds the table; the frame has claimed `--out` (new, or a table `lexicon build` wrote,
/// which it replaces).
fn run(c: Command, outputs: &trueneg::io::outputs::Outputs) -> anyhow::Result<()> {
    let Command::Build {
        tokenizer,
        out,
        wordnet,
        embeddings,
        checkpoint,
        top_k,
        min_cosine,
        stop_words,
    } = c;
    use trueneg::lexicon::embeddings::read_vectors;
    use trueneg::text::synonym_table::{embedding_table, whole_words, wordnet_table};
    let tok = trueneg::text::WordPieceTokenizer::load(&tokenizer)?;
    let words = whole_words(&tok);
    let table = if let Some(e) = embeddings {
        let keep: std::collections::HashSet<String> =
            words.iter().map(|(w, _)| w.to_lowercase()).collect();
        let v = read_vectors(&e, &|w| keep.contains(w))?;
        embedding_table(&tok, &v, top_k, &format!("embeddings:{}", e.display()))?
    } else if let Some(c) = checkpoint {
        check_checkpoint_tokenizer(&c, &tok, &tokenizer)?;
        let map = trueneg::interop::read_safetensors(&c)?;
        let m = map
            .tensors
            .iter()
            .find(|(k, _)| k.ends_with("embeddings.word_embeddings.weight"))
            .map(|(_, t)| t.clone())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: no `*.embeddings.word_embeddings.weight` tensor",
                    c.display()
                )
            })?;
        let stop_words = match &stop_words {
            Some(f) => trueneg::text::self_synonyms::read_stop_words(f)?,
            None => Default::default(),
        };
        let from = trueneg::text::embedding_synonyms::EmbeddingTable {
            tokenizer: &tok,
            k: top_k,
            min_cosine,
            stop_words,
            wordnet_dir: &super::wordnet_dir(&wordnet),
            source: format!("checkpoint:{}", c.display()),
        };
        from.build(m.values, [m.shape[0], m.shape[1]])?
    } else {
        wordnet_table(&tok, &super::wordnet_dir(&wordnet))?
    };
    // The frame let --out through: new, or a table `lexicon build` wrote, replaced here.
    trueneg::io::write::remove_file(&out)?;
    table.save(&out)?;
    outputs.record(&out)?;
    let c = table.coverage(words.len());
    println!(
        "{} of {} whole-word tokens ({:.1} %) have synonyms, mean list length {:.2}; vocabulary {} -> {}",
        c.with_synonyms,
        c.whole_words,
        100.0 * c.with_synonyms as f64 / c.whole_words.max(1) as f64,
        c.mean_list_length,
        c.vocab_size,
        out.display()
    );
    Ok(())
}

/// A checkpoint's embeddings mean something only with its own tokenizer: the run's
/// `tokenizer.json` (two folders up from `checkpoints/step-N/model.safetensors`) or the one
/// beside an exported `model.safetensors` must be `--tokenizer`'s.
fn check_checkpoint_tokenizer(
    checkpoint: &std::path::Path,
    tok: &trueneg::text::WordPieceTokenizer,
    tokenizer: &std::path::Path,
) -> anyhow::Result<()> {
    let dir = checkpoint.parent().unwrap_or(std::path::Path::new("."));
    let run = dir.join("../..");
    let Some(own) = trueneg::text::tokenizer::tokenizer_in(&[dir, &run]) else {
        eprintln!(
            "note: no tokenizer beside {}; its rows are taken to be {}'s ids",
            checkpoint.display(),
            tokenizer.display()
        );
        return Ok(());
    };
    let differ = tok.vocab_differences(&trueneg::text::WordPieceTokenizer::load(&own)?);
    if differ > 0 {
        anyhow::bail!(
            "--checkpoint {}: made with {}, another tokenizer than --tokenizer {} ({differ} of {} tokens differ)",
            checkpoint.display(),
            own.display(),
            tokenizer.display(),
            tok.vocab_size()
        );
    }
    Ok(())
}
