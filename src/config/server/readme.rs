//! README.md's broker key table, generated from [`super::keys`], and the test that fails when
//! the README's copy differs. To refresh the README, print the table and paste it between the
//! markers: `cargo test --lib config::server::readme -- --ignored --nocapture`.

use super::keys::{Type, Update, Weir, BROKER_KEYS};

const START: &str = "<!-- broker-config-table:start -->";
const END: &str = "<!-- broker-config-table:end -->";

fn type_name(ty: Type) -> String {
    match ty {
        Type::Int(min, max) => {
            let name = match max {
                m if m <= i16::MAX as i64 => "short",
                m if m <= i32::MAX as i64 => "int",
                _ => "long",
            };
            let open_min = [i16::MIN as i64, i32::MIN as i64, i64::MIN].contains(&min);
            let open_max = [i16::MAX as i64, i32::MAX as i64, i64::MAX].contains(&max);
            match (open_min, open_max) {
                (true, true) => name.to_string(),
                (false, true) => format!("{name} ≥ {min}"),
                _ => format!("{name} {min}–{max}"),
            }
        }
        Type::Bool => "boolean".into(),
        Type::Double(None) => "double".into(),
        Type::Double(Some(floor)) => format!("double > {floor}"),
        Type::Text => "string".into(),
        Type::List => "list".into(),
        Type::Password => "password".into(),
    }
}

/// The README section between the markers (markers excluded).
pub fn broker_key_table() -> String {
    let mut out = String::from(
        "| Key | Type | Default | Dynamic | Weir | Meaning |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for k in BROKER_KEYS {
        let default = match k.default {
            None => "(none)".to_string(),
            Some("") => "(empty)".to_string(),
            Some(v) => format!("`{v}`"),
        };
        let update = match k.update {
            Update::ReadOnly => "read-only",
            Update::PerBroker => "per broker",
            Update::ClusterWide => "cluster-wide",
            Update::PerListener => "per listener",
        };
        let weir = match k.weir {
            Weir::Uses => "uses",
            Weir::Accepts => "accepts",
            Weir::Stores => "stores (dynamic only)",
        };
        out.push_str(&format!(
            "| `{}` | {} | {default} | {update} | {weir} | {} |\n",
            k.name,
            type_name(k.ty),
            k.doc
        ));
    }
    out
}

#[test]
fn readme_broker_key_table_matches_the_key_table() {
    let readme = include_str!("../../../README.md");
    let start = readme.find(START).expect("README.md has the start marker") + START.len();
    let end = readme.find(END).expect("README.md has the end marker");
    let expected = broker_key_table();
    assert!(
        readme[start..end].trim() == expected.trim(),
        "README.md's broker key table differs from src/config/server/keys.rs; put this \
         between the markers (or print it with `cargo test --lib config::server::readme -- \
         --ignored --nocapture`):\n{expected}"
    );
}

#[test]
fn docs_are_one_line_without_pipes() {
    for k in BROKER_KEYS {
        assert!(!k.doc.is_empty(), "{}", k.name);
        assert!(!k.doc.contains(['|', '\n']), "{}", k.name);
    }
}

#[test]
#[ignore = "prints README.md's broker key table"]
fn print_broker_key_table() {
    println!("{START}\n{}{END}", broker_key_table());
}
