//! PROTOCOL.md stays complete: every setting the relay undoes when a client
//! leaves, and every `Target.*`/`Browser.*` method of the CDP specification
//! the relay serves, has its row.

use std::path::Path;

fn doc() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("PROTOCOL.md")).expect("PROTOCOL.md")
}

#[test]
fn every_setting_the_relay_undoes_has_a_row() {
    let doc = doc();
    let missing: Vec<&str> = relay_engine::LEDGER_SETTINGS
        .iter()
        .map(|s| s.method)
        .filter(|method| !doc.contains(&format!("| `{method}`")))
        .collect();
    assert!(missing.is_empty(), "PROTOCOL.md has no row for {missing:?}");
}

#[test]
fn every_browser_domain_method_of_the_specification_has_a_row() {
    // The protocol description the relay serves at /json/protocol.
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/devtools-protocol.json");
    let spec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(spec).unwrap()).unwrap();
    let doc = doc();
    let mut missing = Vec::new();
    let mut seen = 0;
    for domain in spec["domains"].as_array().unwrap() {
        let name = domain["domain"].as_str().unwrap();
        if name != "Target" && name != "Browser" {
            continue;
        }
        for command in domain["commands"].as_array().unwrap() {
            let method = format!("{name}.{}", command["name"].as_str().unwrap());
            seen += 1;
            if !doc.contains(&format!("| `{method}` |")) {
                missing.push(method);
            }
        }
    }
    assert!(seen > 30, "the specification lists the two domains ({seen} methods)");
    assert!(missing.is_empty(), "PROTOCOL.md has no row for {missing:?}");
}
