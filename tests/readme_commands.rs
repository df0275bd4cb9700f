//! Every `trueneg` command of the README and docs/ (their indented code blocks, continuation
//! lines joined; `cargo run --release -- …` too) is a command line the binary accepts: same
//! subcommands, same flags, values of the right kind. Checked with `TRUENEG_PARSE_ONLY`, which
//! parses and runs nothing, so the README cannot drift from the program.

mod common;

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
