//! `objective.kind` names a set of the registry's parts (or a step of its own): any set is a
//! kind, named in the registry's order, with its own colour.

use trueneg::objective::ObjectiveKind;
use trueneg::text::shards::DataKind;

fn kind(name: &str) -> ObjectiveKind {
    ObjectiveKind::parse(name).unwrap_or_else(|| panic!("`{name}` is not a kind"))
}

#[test]
fn a_kind_is_any_set_of_parts_named_in_the_registrys_order() {
    assert_eq!(kind("baseline"), ObjectiveKind::BASELINE);
    assert_eq!(kind("sr+hc"), kind("hc+sr"));
    assert_eq!(kind("sr+hc").name(), "hc+sr");
    let all = kind("sr-sent+sr+hc");
    assert_eq!(all.name(), "hc+sr+sr-sent");
    assert!(all.has("hc") && all.has("sr") && all.has("sr-sent"));
    assert!(!kind("sr").has("hc"));
    assert!(all.reports_corrections() && !kind("sr+sr-sent").reports_corrections());
    assert_eq!(kind("hc").data(), DataKind::Packed);
    assert_eq!(kind("cline").data(), DataKind::Triples);
    for bad in ["hc+hc", "baseline+hc", "cline+sr", "hc+", "", "h c", "HC"] {
        assert_eq!(ObjectiveKind::parse(bad), None, "`{bad}`");
    }
}

#[test]
fn every_kind_reads_back_from_its_name_and_has_a_colour_of_its_own() {
    let names = [
        "baseline",
        "hc",
        "sr",
        "sr-sent",
        "cline",
        "hc+sr",
        "hc+sr-sent",
        "sr+sr-sent",
        "hc+sr+sr-sent",
    ];
    let mut colours = Vec::new();
    for n in names {
        let k = kind(n);
        assert_eq!(k.name(), n);
        let toml = toml::to_string(&Wrap { kind: k }).unwrap();
        assert_eq!(toml.trim(), format!("kind = \"{n}\""));
        let back: Wrap = toml::from_str(&toml).unwrap();
        assert_eq!(back.kind, k);
        colours.push(k.colour());
    }
    // The baseline and the single parts keep the first colours, in the registry's order.
    assert_eq!(colours[..4], [0, 1, 2, 3]);
    let mut unique = colours.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), colours.len(), "{colours:?}");
    let err = toml::from_str::<Wrap>("kind = \"hc+cline\"")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("hc+cline") && err.contains("joined by `+`"),
        "{err}"
    );
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Wrap {
    kind: ObjectiveKind,
}
