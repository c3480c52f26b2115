//! Architecture invariants that the compiler cannot check, checked on the
//! source (ARCHITECTURE.md names each one's check).

use std::path::{Path, PathBuf};

/// Every `.rs` file of the product (the relay's crates, the extension's
/// logic, the protocol), without tests and benches.
fn product_sources() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    for dir in ["relay", "extension-wasm/src", "shared-protocol/src"] {
        let descend = |path: &Path| !matches!(file_name(path), "tests" | "target" | "benches");
        for path in rust_files(&root.join(dir), descend) {
            if matches!(file_name(&path), "tests.rs" | "route_tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests at the end of a module are not the product.
            let product = text.split("#[cfg(test)]").next().unwrap_or_default().to_string();
            out.push((path, product));
        }
    }
    assert!(out.len() > 30, "the walk found the sources: {}", out.len());
    out
}

/// Every `.rs` file under `dir`, going into the folders `descend` allows.
fn rust_files(dir: &Path, descend: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if descend(&path) {
                    stack.push(path);
                }
            } else if file_name(&path).ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or_default()
}

fn relative(path: &Path) -> String {
    let text = path.display().to_string();
    text.split("/../").nth(1).unwrap_or(&text).to_string()
}

/// Files (relative to the workspace) that contain `needle` in product code.
fn holders(needle: &str) -> Vec<String> {
    let mut found: Vec<String> = product_sources()
        .into_iter()
        .filter(|(_, text)| text.contains(needle))
        .map(|(path, _)| relative(&path))
        .collect();
    found.sort();
    found
}

#[test]
fn only_net_listens_and_accepts() {
    assert_eq!(holders("TcpListener::bind"), ["relay/src/net/mod.rs"]);
    assert_eq!(holders(".accept()"), ["relay/src/net/mod.rs"]);
}

#[test]
fn unsafe_code_lives_only_in_the_system_seams() {
    // Win32 calls, macOS's `proc_pidinfo`, reading SIGHUP's disposition
    // (is serve under nohup?) and glibc's `malloc_trim` have no safe
    // wrapper that covers them;
    // everything else is safe Rust (the workspace denies `unsafe_code`).
    let seams = [
        "relay/managed-driver/src/process/macos.rs",
        "relay/managed-driver/src/process/windows.rs",
        "relay/src/console.rs",
        "relay/src/memory.rs",
        "relay/src/shutdown.rs",
        "relay/state-dir/src/private.rs",
    ];
    assert_eq!(holders("allow(unsafe_code)"), seams);
    assert_eq!(holders("unsafe {"), seams);
}

#[test]
fn one_cdp_client() {
    // The managed browsers have no port to connect to (they speak over a
    // pipe), so the CDP client is the only WebSocket client there is.
    assert_eq!(holders("client_async"), ["relay/cdp-client/src/client.rs"]);
    assert!(holders("connect_async").is_empty(), "{:?}", holders("connect_async"));
}

#[test]
fn the_control_engine_speaks_typed_cdp() {
    // A method name in a string is untyped CDP (cdp_client::protocol has a
    // type for every command and event the engine uses).
    let untyped: Vec<String> = product_sources()
        .into_iter()
        .filter(|(path, _)| path.display().to_string().contains("control-engine"))
        .filter(|(_, text)| {
            [
                "\"Page.",
                "\"Runtime.",
                "\"Target.",
                "\"DOM.",
                "\"Input.",
                "\"Emulation.",
                "\"Accessibility.",
                "\"Network.",
                "\"Log.",
            ]
            .iter()
            .any(|domain| text.contains(domain))
        })
        .map(|(path, _)| relative(&path))
        .collect();
    assert!(untyped.is_empty(), "method names as strings in {untyped:?}");
}

#[test]
fn the_pipes_callers_speak_typed_cdp() {
    // `Pipe::send` takes a typed command; only the multiplexer itself
    // (pipe.rs) reads method names, those of its clients' raw frames.
    let untyped: Vec<String> = product_sources()
        .into_iter()
        .filter(|(path, _)| {
            let path = relative(path);
            (path.starts_with("relay/managed-driver/") && !path.ends_with("/pipe.rs")) || path.starts_with("relay/src/")
        })
        .filter(|(_, text)| {
            ["Browser", "Target", "Page", "Runtime", "DOM", "Input", "Network", "Emulation", "Fetch", "Storage", "IO"]
                .iter()
                .any(|domain| text.contains(&format!("\"{domain}.")))
        })
        .map(|(path, _)| relative(&path))
        .collect();
    assert!(untyped.is_empty(), "method names as strings in {untyped:?}");
}

#[test]
fn state_is_owned_and_passed_never_global() {
    // A static with interior mutability is state every caller shares
    // unseen (the managed browsers were kept so). The few that must be
    // process-wide say why here.
    let allowed = [
        // Windows: handle inheritance is per process, so spawns are too.
        ("relay/managed-driver/src/process/windows.rs", "static SPAWNING"),
        // The system's certificate roots, read once: a cache of a constant.
        ("relay/cdp-client/src/net.rs", "static ROOTS"),
        // A counter that makes temporary file names unique per call.
        ("relay/state-dir/src/lib.rs", "static CALLS"),
        // The worker's one core: wasm-bindgen's exports are free functions.
        ("extension-wasm/src/glue.rs", "static CORE"),
        ("extension-wasm/src/glue.rs", "static EARLY"),
        ("extension-wasm/src/glue.rs", "static SOCKET_GENERATION"),
        ("extension-wasm/src/text.rs", "static ENCODER"),
    ];
    let mutable = ["Mutex", "RwLock", "RefCell", "Cell<", "Atomic", "OnceLock", "TextEncoder"];
    let mut found = Vec::new();
    for (path, text) in product_sources() {
        for line in text.lines().map(str::trim) {
            let Some(at) = line.find("static ") else { continue };
            if line.starts_with("//") || !mutable.iter().any(|m| line.contains(m)) {
                continue;
            }
            let name: String = line[at..].chars().take_while(|c| *c != ':').collect();
            let place = (relative(&path), name.trim().to_string());
            if !allowed.iter().any(|(file, static_)| place.0 == *file && place.1 == *static_) {
                found.push(place);
            }
        }
    }
    assert!(found.is_empty(), "global mutable state: {found:?}");
}

/// The workspace's members but the test bench (`tests`, the e2e crate):
/// read from the root Cargo.toml, so a crate added there is checked
/// without anyone remembering to list it here.
fn product_crates() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest.split_once("\nmembers = [").expect("the workspace's members").1;
    let members = members.split_once(']').expect("a closed list").0;
    let crates: Vec<String> = members
        .split(',')
        .map(|member| member.trim().trim_matches('"').to_string())
        .filter(|member| !member.is_empty() && member != "tests")
        .collect();
    assert!(crates.len() >= 10 && crates.iter().all(|c| root.join(c).join("src/lib.rs").exists()), "{crates:?}");
    crates
}

#[test]
fn the_code_maps_dependency_list_is_the_cargo_files() {
    // ARCHITECTURE.md's code map lists each crate's dependencies among
    // the workspace's crates, one line per crate: `name ──► a, b`.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let listed: std::collections::BTreeMap<String, Vec<String>> = map
        .lines()
        .filter_map(|line| line.split_once(" ──► "))
        .filter(|(name, _)| !name.starts_with("tests"))
        .map(|(name, deps)| {
            let mut deps: Vec<String> = deps.split(", ").map(str::to_string).collect();
            deps.sort();
            (name.trim().to_string(), deps)
        })
        .collect();
    let name_of = |dir: &str| {
        let manifest = std::fs::read_to_string(root.join(dir).join("Cargo.toml")).unwrap();
        let line = manifest.lines().find(|l| l.starts_with("name = ")).expect("a package name").to_string();
        line.trim_start_matches("name = ").trim_matches('"').to_string()
    };
    let names: Vec<String> = product_crates().iter().map(|dir| name_of(dir)).collect();
    let mut actual = std::collections::BTreeMap::new();
    for dir in product_crates() {
        let manifest = std::fs::read_to_string(root.join(&dir).join("Cargo.toml")).unwrap();
        let mut deps: Vec<String> = manifest
            .lines()
            .filter(|line| line.contains("path = "))
            .filter_map(|line| line.split_once(" = ").map(|(name, _)| name.trim().to_string()))
            .filter(|name| names.contains(name))
            .collect();
        deps.sort();
        deps.dedup();
        if !deps.is_empty() {
            actual.insert(name_of(&dir), deps);
        }
    }
    assert_eq!(listed, actual, "ARCHITECTURE.md's code map against the Cargo.toml files");
}

#[test]
fn each_crate_shows_only_its_faces() {
    // A module is `pub` only when other crates use it as a namespace (its
    // face); everything else is private, what other crates use re-exported
    // at the crate's root, and the `unreachable_pub` lint (workspace) makes
    // every item that no other crate can reach `pub(crate)`.
    // Every product crate: one the list does not name shows none.
    let faces: [(&str, &[&str]); 6] = [
        ("shared-protocol", &["auth", "close_code", "layout"]),
        ("extension-wasm", &["core"]),
        ("relay/cdp-client", &["endpoint", "http", "protocol"]),
        ("relay/relay-engine", &["cdp"]),
        ("relay/control-engine", &["api"]),
        ("relay/activity", &["summary"]),
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let crates = product_crates();
    assert!(faces.iter().all(|(dir, _)| crates.contains(&(*dir).to_string())), "{crates:?}");
    for dir in crates {
        let lib = format!("{dir}/src/lib.rs");
        let expected: &[&str] = faces.iter().find(|(named, _)| *named == dir).map_or(&[], |(_, faces)| faces);
        let text = std::fs::read_to_string(root.join(&lib)).unwrap();
        let public: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("pub mod "))
            .map(|rest| rest.trim_end_matches([';', '{', ' ']))
            .collect();
        assert_eq!(public, expected, "{lib}: its public modules");
    }
}

/// Every dependency a product crate declares is used where it is declared:
/// a normal one in the crate's product code (not only in its tests: then it
/// belongs in dev-dependencies), a dev-dependency in its tests. A crate used
/// only for a feature it switches on names why here.
#[test]
fn every_dependency_is_used_where_it_is_declared() {
    /// (crate directory, dependency): used for what it enables, not by name.
    const ENABLERS: [(&str, &str, &str); 1] =
        [("extension-wasm", "getrandom", "its wasm_js feature gives getrandom a source in the browser")];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    for dir in product_crates() {
        let dir = dir.as_str();
        let manifest = std::fs::read_to_string(root.join(dir).join("Cargo.toml")).unwrap();
        let (mut normal, mut dev) = (Vec::new(), Vec::new());
        let mut section = "";
        for line in manifest.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                section = if line.ends_with("dev-dependencies]") {
                    "dev"
                } else if line.ends_with("dependencies]") {
                    "normal"
                } else {
                    ""
                };
                continue;
            }
            let Some((name, _)) = line.split_once('=') else { continue };
            let name = name.trim().to_string();
            if name.is_empty() || name.starts_with('#') {
                continue;
            }
            match section {
                "normal" => normal.push(name),
                "dev" => dev.push(name),
                _ => {}
            }
        }
        // The crate's code, product and tests apart. Other crates of the
        // workspace live under relay/: their folders are not this one's.
        let (mut product, mut tests) = (String::new(), String::new());
        let descend = |path: &Path| {
            !path.join("Cargo.toml").exists() && !matches!(file_name(path), "target" | "node_modules" | "pkg")
        };
        for path in rust_files(&root.join(dir), descend) {
            let text = std::fs::read_to_string(&path).unwrap();
            let name = file_name(&path);
            let in_tests = path.components().any(|c| matches!(c.as_os_str().to_str(), Some("tests" | "benches")));
            if in_tests || name == "tests.rs" || name.ends_with("_tests.rs") {
                tests.push_str(&text);
            } else {
                let (code, unit_tests) = text.split_once("#[cfg(test)]").unwrap_or((&text, ""));
                product.push_str(code);
                tests.push_str(unit_tests);
            }
        }
        let used = |code: &str, name: &str| {
            let ident = name.replace('-', "_");
            [format!("{ident}::"), format!("use {ident}"), format!("{ident}!")]
                .iter()
                .any(|n| code.contains(n.as_str()))
        };
        for name in &normal {
            if ENABLERS.iter().any(|(d, n, _)| *d == dir && n == name) {
                continue;
            }
            if !used(&product, name) {
                let where_ = if used(&tests, name) { "only in tests: a dev-dependency" } else { "unused" };
                problems.push(format!("{dir}: {name} is {where_}"));
            }
        }
        for name in &dev {
            if !used(&tests, name) && !used(&product, name) {
                problems.push(format!("{dir}: dev-dependency {name} is unused"));
            }
        }
    }
    assert!(problems.is_empty(), "dependencies out of place:\n{}", problems.join("\n"));
}
