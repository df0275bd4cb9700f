//! Every `trueneg` command of the README and docs/ (their indented code blocks, continuation
//! lines joined; `cargo run --release -- …` too) is a command line the binary accepts: same
//! subcommands, same flags, values of the right kind. Checked with `TRUENEG_PARSE_ONLY`, which
//! parses and runs nothing, so the README cannot drift from the program.

use crate::common;

/// The command lines of `text`: each code line starting with `trueneg ` or `cargo run`, with
/// the lines it continues with `\`, and its line number.
fn commands(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let code = lines[i].starts_with("    ") || lines[i].starts_with('\t');
        if code && (line.starts_with("trueneg ") || line.starts_with("cargo run --release -- ")) {
            let mut cmd = line.to_string();
            let start = i + 1;
            while cmd.ends_with('\\') && i + 1 < lines.len() {
                cmd.pop();
                i += 1;
                cmd.push(' ');
                cmd.push_str(lines[i].trim());
            }
            out.push((start, cmd));
        }
        i += 1;
    }
    out
}

/// A command line's words: split at spaces outside quotes, quotes removed, a `#` comment
/// dropped.
fn words(cmd: &str) -> Vec<String> {
    let (mut out, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in cmd.chars() {
        match (quote, c) {
            (None, '#') if !any => break,
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, ' ') => {
                if any {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (_, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

#[test]
fn every_readme_command_parses() {
    let commands: Vec<(String, usize, String)> = common::readme_and_docs()
        .into_iter()
        .flat_map(|(file, text)| {
            commands(&text)
                .into_iter()
                .map(move |(line, cmd)| (file.clone(), line, cmd))
        })
        .collect();
    assert!(
        commands.len() >= 25,
        "only {} commands found",
        commands.len()
    );
    let mut bad = Vec::new();
    for (file, line, cmd) in &commands {
        let w = words(cmd);
        let args: Vec<&String> = match w.iter().position(|x| x == "--") {
            Some(dash) if w[0] == "cargo" => w[dash + 1..].iter().collect(),
            _ => w[1..].iter().collect(),
        };
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_trueneg"))
            .args(args)
            .env("TRUENEG_PARSE_ONLY", "1")
            .output()
            .unwrap();
        if !out.status.success() {
            bad.push(format!(
                "{file}:{line}: {cmd}\n  {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // The check fails a flag the program does not have.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trueneg"))
        .args(["pretrain", "--config", "tiny", "--no-such-flag"])
        .env("TRUENEG_PARSE_ONLY", "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn words_split_like_a_shell() {
    assert_eq!(
        words(r#"trueneg a --set 'x=1 2' "y" # comment"#),
        ["trueneg", "a", "--set", "x=1 2", "y"]
    );
}

/// The `--flag`s named in backticks in `text` (prose and inline code, not the code blocks,
/// which [`every_readme_command_parses`] runs).
fn named_flags(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for span in text.split('`').skip(1).step_by(2) {
        for word in span.split(|c: char| c.is_whitespace() || c == '=' || c == ',') {
            let flag = word.trim_end_matches(['.', ')', ':', ';']);
            let name = flag.strip_prefix("--").unwrap_or("");
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                out.push(flag.to_string());
            }
        }
    }
    out
}

/// Flags of other programs the docs show: cargo's, torchrun's, TensorBoard's, the PyTorch
/// benchmark's (`../shared/bench`) and `scripts/build-gpu.sh`'s.
const OTHER_PROGRAMS: [&str; 10] = [
    "--release",
    "--features",
    "--example",
    "--target-dir",
    "--nproc-per-node",
    "--nnodes",
    "--logdir",
    "--masked-head",
    "--compile",
    "--check",
];

#[test]
fn every_flag_the_docs_name_is_a_flag_of_the_binary() {
    let help = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_trueneg"))
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let top = help(&["--help"]);
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 10, "{top}");
    let mut all = top.clone();
    for c in &commands {
        all += &help(&[c, "--help"]);
        if c == "lexicon" {
            all += &help(&[c, "build", "--help"]);
        }
    }
    let mut bad = Vec::new();
    for (file, text) in common::readme_and_docs() {
        for flag in named_flags(&text) {
            let known = [" ", "\n", "]", ","]
                .iter()
                .any(|end| all.contains(&format!("{flag}{end}")));
            if !known && !OTHER_PROGRAMS.contains(&flag.as_str()) {
                bad.push(format!("{file}: `{flag}`"));
            }
        }
    }
    bad.dedup();
    assert!(
        bad.is_empty(),
        "flags the binary does not have:\n{}",
        bad.join("\n")
    );
    assert_eq!(named_flags("use `--keep best`, `--x_y`"), vec!["--keep"]);
}

#[test]
fn the_commands_that_take_a_preset_list_every_preset() {
    for command in ["pretrain", "ablation"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_trueneg"))
            .args([command, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout).replace(['\n', ' '], "");
        for (name, _) in trueneg::train::config::PRESETS {
            assert!(help.contains(name), "`{command} --help` lacks {name}");
        }
    }
}
