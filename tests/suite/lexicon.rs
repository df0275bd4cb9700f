//! Synonym lexicons on the real WordNet (Debian's wordnet-base) and on hand-made embeddings.

use std::path::{Path, PathBuf};

use trueneg::lexicon::WordNet;
use trueneg::lexicon::embeddings::{WordVectors, read_vectors, top_k_neighbours};
use trueneg::text::WordPieceTokenizer;
use trueneg::text::{SynonymTable, synonym_table::wordnet_table};

const WORDNET: &str = "/usr/share/wordnet";

/// A BERT-uncased-style vocabulary with the words of the paper's examples.
fn tokenizer(dir: &Path) -> WordPieceTokenizer {
    let words = "[PAD] [UNK] [CLS] [SEP] [MASK] the main primary chief stay remain stayed remained effort attempt endeavor try xyzzy ##s ##ing , . happy glad";
    let p = dir.join("vocab.txt");
    std::fs::write(&p, words.split(' ').collect::<Vec<_>>().join("\n")).unwrap();
    WordPieceTokenizer::load(&p).unwrap()
}

fn id(t: &WordPieceTokenizer, w: &str) -> u32 {
    t.inner.token_to_id(w).unwrap()
}

#[test]
fn wordnet_synonyms_of_the_papers_examples() {
    let wn = WordNet::open(Path::new(WORDNET)).unwrap();
    assert!(
        wn.lemma_count() > 80_000,
        "{} single-word lemmas",
        wn.lemma_count()
    );
    assert!(wn.synonyms("main").contains("primary"));
    assert!(wn.synonyms("main").contains("chief"));
    assert!(wn.synonyms("stay").contains("remain"));
    for s in ["endeavor", "effort", "try"] {
        assert!(wn.synonyms("attempt").contains(s), "attempt ~ {s}");
    }
    // Lemmatised through morphy's rules and re-inflected.
    assert!(wn.synonyms("stayed").contains("remained"));
    assert!(wn.synonyms("xyzzy").is_empty());
}

#[test]
fn wordnet_table_projects_onto_the_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let t = tokenizer(dir.path());
    let table = wordnet_table(&t, Path::new(WORDNET)).unwrap();
    for (a, b) in [
        ("main", "primary"),
        ("stay", "remain"),
        ("effort", "attempt"),
        ("stayed", "remained"),
        ("happy", "glad"),
    ] {
        assert!(table.are_synonyms(id(&t, a), id(&t, b)), "{a} ~ {b}");
        assert!(
            table.are_synonyms(id(&t, b), id(&t, a)),
            "symmetric: {b} ~ {a}"
        );
    }
    assert!(
        table.synonyms(id(&t, "xyzzy")).is_empty(),
        "no synsets, no synonyms"
    );
    assert!(
        table.synonyms(id(&t, "##s")).is_empty(),
        "word pieces are left out"
    );
    assert!(table.synonyms(id(&t, "[MASK]")).is_empty());
    let c = table.coverage(trueneg::text::whole_words(&t).len());
    assert!(c.with_synonyms >= 12 && c.mean_list_length >= 1.0, "{c:?}");

    // Saved and loaded back; loading for another tokenizer is refused; never overwritten.
    let p = dir.path().join("lex.safetensors");
    table.save(&p).unwrap();
    assert_eq!(SynonymTable::load_for(&p, &t.fingerprint()).unwrap(), table);
    let e = SynonymTable::load_for(&p, "0123456789abcdef")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lex.safetensors") && e.contains("another tokenizer"),
        "{e}"
    );
    let e = table.save(&p).unwrap_err().to_string();
    assert!(e.contains("already exists"), "{e}");
}

#[test]
fn missing_wordnet_says_how_to_install_it() {
    let e = WordNet::open(Path::new("/nonexistent/wordnet"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("wordnet-base") && e.contains("data.noun"), "{e}");
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn embedding_files_are_read_and_bad_ones_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let all = |_: &str| true;
    let w2v = write(
        dir.path(),
        "v.txt",
        "3 2\nmain 1 0\nprimary 0.9 0.1\nstay 0 1\n",
    );
    let v = read_vectors(&w2v, &all).unwrap();
    assert_eq!((v.words.len(), v.dim), (3, 2));
    let glove = write(dir.path(), "g.txt", "main 1 0 0\nprimary 0.9 0.1 0\n");
    assert_eq!(read_vectors(&glove, &all).unwrap().dim, 3);
    // Binary word2vec.
    let mut bin = b"2 2\n".to_vec();
    for (w, a, b) in [("main", 1.0f32, 0.0f32), ("stay", 0.0, 1.0)] {
        bin.extend(format!("{w} ").as_bytes());
        bin.extend(a.to_le_bytes());
        bin.extend(b.to_le_bytes());
        bin.push(b'\n');
    }
    let p = dir.path().join("v.bin");
    std::fs::write(&p, bin).unwrap();
    let v = read_vectors(&p, &all).unwrap();
    assert_eq!(v.words, vec!["main", "stay"]);
    assert_eq!(v.values, vec![1.0, 0.0, 0.0, 1.0]);

    let bad_dim = write(dir.path(), "bad1.txt", "3 4\nmain 1 0\n");
    let e = read_vectors(&bad_dim, &all).err().unwrap().to_string();
    assert!(e.contains("bad1.txt:2") && e.contains("dimension"), "{e}");
    let bad_num = write(dir.path(), "bad2.txt", "2 2\nmain 1 0\nstay x 1\n");
    let e = read_vectors(&bad_num, &all).err().unwrap().to_string();
    assert!(e.contains("bad2.txt:3") && e.contains("non-numeric"), "{e}");
}

#[test]
fn embedding_neighbours_are_cosine_top_k() {
    let v = WordVectors {
        words: vec![
            "main".into(),
            "primary".into(),
            "stay".into(),
            "remain".into(),
        ],
        dim: 2,
        values: vec![1.0, 0.0, 10.0, 1.0, 0.0, 1.0, 0.1, 3.0],
    };
    let nb = top_k_neighbours(&v, 1, &burn::prelude::Device::flex());
    assert_eq!(nb, vec![vec![1], vec![0], vec![3], vec![2]]);
}

#[test]
fn inflection_doubles_consonants_and_keeps_unchanging_pasts() {
    use trueneg::lexicon::wordnet::Form;
    let wn = WordNet::open(Path::new(WORDNET)).unwrap();
    let verb = |l: &str, f: Form| wn.inflect(l, f, 1);
    assert_eq!(verb("stop", Form::Past), "stopped");
    assert_eq!(verb("run", Form::Gerund), "running");
    assert_eq!(verb("put", Form::Past), "put");
    assert_eq!(verb("put", Form::Gerund), "putting");
    assert_eq!(verb("cut", Form::Past), "cut");
    assert_eq!(verb("go", Form::Past), "went", "the exception list");
    // No doubling: two syllables, two final consonants, two vowels, w / x / y.
    assert_eq!(verb("visit", Form::Past), "visited");
    assert_eq!(verb("help", Form::Gerund), "helping");
    assert_eq!(verb("rain", Form::Past), "rained");
    assert_eq!(verb("fix", Form::Past), "fixed");
    assert_eq!(verb("show", Form::Gerund), "showing");
    assert_eq!(verb("hope", Form::Gerund), "hoping");
    assert_eq!(wn.inflect("big", Form::Comparative, 2), "bigger");
    assert_eq!(wn.inflect("quick", Form::Superlative, 2), "quickest");
    assert!(!wn.other_inflections("put").contains(&"puted".to_string()));
}
