//! Architecture invariants that the compiler cannot check, checked on the
//! source (ARCHITECTURE.md names each one's check).

use std::path::{Path, PathBuf};

/// Every `.rs` file of the product (the relay's crates, the extension's
/// logic, the protocol), without tests and benches: each whole, but for its
/// unit tests (see `split_tests`).
fn product_sources() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["relay", "extension-wasm/src", "shared-protocol/src"] {
        let descend = |path: &Path| !matches!(file_name(path), "tests" | "target" | "benches");
        files.extend(rust_files(&root.join(dir), descend));
    }
    let out: Vec<(PathBuf, String)> = split_files(files)
        .into_iter()
        .filter(|(_, product, _)| !product.is_empty())
        .map(|(path, product, _)| (path, product))
        .collect();
    assert!(out.len() > 30, "the walk found the sources: {}", out.len());
    out
}

/// Each file's text as (product, tests): the items gated by `#[cfg(test)]`
/// are tests, and so is the whole of a file that such a `mod name;` brings in.
fn split_files(files: Vec<PathBuf>) -> Vec<(PathBuf, String, String)> {
    let mut split: Vec<(PathBuf, String, String)> = files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let (product, tests) = split_tests(&text);
            (path, product, tests)
        })
        .collect();
    // The files of the test modules declared, as rustc finds them.
    let mut test_modules = Vec::new();
    for (path, _, tests) in &split {
        let dir = path.parent().unwrap();
        let dir = match file_name(path) {
            "mod.rs" | "lib.rs" | "main.rs" => dir.to_path_buf(),
            name => dir.join(name.trim_end_matches(".rs")),
        };
        for word in tests.split("mod ").skip(1) {
            let name: String = word.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if word[name.len()..].trim_start().starts_with(';') {
                test_modules.push(dir.join(format!("{name}.rs")));
                test_modules.push(dir.join(name).join("mod.rs"));
            }
        }
    }
    for (path, product, tests) in &mut split {
        if test_modules.contains(path) {
            *tests = std::mem::take(product) + tests.as_str();
        }
    }
    split
}

/// `text` as (product, tests): every item gated by `#[cfg(test)]` (a
/// `mod tests { … }`, a `mod tests;`, a test-only `fn` or `impl`) goes to
/// tests, found by a scan that knows Rust's strings, characters and
/// comments, so a brace or an attribute in one of them is not taken for
/// code. An item ends at its first `;` or `,` outside brackets, or at the
/// brace that closes its body (a gated statement such as `let x = if a
/// { … } else { … };` would end early: the product has none).
fn split_tests(text: &str) -> (String, String) {
    const GATE: &[u8] = b"#[cfg(test)]";
    let bytes = text.as_bytes();
    let (mut product, mut tests) = (String::new(), String::new());
    let (mut at, mut kept) = (0, 0);
    while at < bytes.len() {
        if let Some(end) = literal_end(bytes, at) {
            at = end;
        } else if bytes[at..].starts_with(GATE) {
            let end = item_end(bytes, at + GATE.len());
            product.push_str(&text[kept..at]);
            tests.push_str(&text[at..end]);
            tests.push('\n');
            (at, kept) = (end, end);
        } else {
            at += 1;
        }
    }
    product.push_str(&text[kept..]);
    (product, tests)
}

/// Where the item that starts at `at` ends (see `split_tests`).
fn item_end(bytes: &[u8], mut at: usize) -> usize {
    let mut depth = 0i32;
    while at < bytes.len() {
        if let Some(end) = literal_end(bytes, at) {
            at = end;
            continue;
        }
        match bytes[at] {
            b'{' | b'(' | b'[' => depth += 1,
            b')' | b']' | b'}' if depth == 0 => return at,
            b')' | b']' => depth -= 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    // `use a::{b, c};` ends at its `;`.
                    let rest = bytes[at + 1..].iter().take_while(|b| b.is_ascii_whitespace()).count();
                    let after = at + 1 + rest;
                    return if bytes.get(after) == Some(&b';') { after + 1 } else { at + 1 };
                }
            }
            b';' | b',' if depth == 0 => return at + 1,
            _ => {}
        }
        at += 1;
    }
    at
}

/// Where the comment, string or character literal that starts at `at`
/// ends, if one does.
fn literal_end(bytes: &[u8], at: usize) -> Option<usize> {
    let ident = |i: usize| bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_';
    let find = |from: usize, needle: &[u8]| {
        bytes[from..].windows(needle.len()).position(|w| w == needle).map_or(bytes.len(), |p| from + p + needle.len())
    };
    match bytes[at] {
        b'/' if bytes.get(at + 1) == Some(&b'/') => Some(find(at, b"\n")),
        b'/' if bytes.get(at + 1) == Some(&b'*') => {
            // Block comments nest.
            let (mut depth, mut i) = (0, at);
            while i + 1 < bytes.len() {
                match &bytes[i..i + 2] {
                    b"/*" => (depth, i) = (depth + 1, i + 2),
                    b"*/" if depth == 1 => return Some(i + 2),
                    b"*/" => (depth, i) = (depth - 1, i + 2),
                    _ => i += 1,
                }
            }
            Some(bytes.len())
        }
        b'"' => {
            let mut i = at + 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            Some((i + 1).min(bytes.len()))
        }
        // `r"…"`, `r#"…"#`, `br"…"`: an `r` that starts a word (or follows
        // the `b` or `c` that does).
        b'r' if at == 0 || !ident(at - 1) || (matches!(bytes[at - 1], b'b' | b'c') && (at == 1 || !ident(at - 2))) => {
            let hashes = bytes[at + 1..].iter().take_while(|b| **b == b'#').count();
            if bytes.get(at + 1 + hashes) != Some(&b'"') {
                return None;
            }
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            Some(find(at + 2 + hashes, &close))
        }
        b'\'' => {
            // A character (`'a'`, `'\''`, `'é'`), or else a lifetime.
            if bytes.get(at + 1) == Some(&b'\\') {
                return Some(find(at + 3, b"'"));
            }
            let width = match bytes.get(at + 1)? {
                b if *b < 0x80 => 1,
                b if *b >= 0xF0 => 4,
                b if *b >= 0xE0 => 3,
                _ => 2,
            };
            (bytes.get(at + 1 + width) == Some(&b'\'')).then_some(at + 2 + width)
        }
        _ => None,
    }
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
        // The system's certificate roots, read once: a cache of a constant.
        ("relay/cdp-client/src/net.rs", "static ROOTS"),
        // A counter that makes temporary file names unique per call.
        ("relay/state-dir/src/dir.rs", "static CALLS"),
        // The worker's one core: wasm-bindgen's exports are free functions.
        ("extension-wasm/src/glue.rs", "static CORE"),
        ("extension-wasm/src/glue.rs", "static EARLY"),
        ("extension-wasm/src/glue.rs", "static SOCKET_GENERATION"),
        ("extension-wasm/src/text.rs", "static ENCODER"),
        // The worker's two answer callbacks, made once for every command.
        ("extension-wasm/src/glue.rs", "static ANSWER_CALLBACKS"),
        // The page script without its comments, made once: a cache of a constant.
        ("relay/control-engine/src/in_page.rs", "static PAGE_SCRIPT"),
    ];
    let mut found = Vec::new();
    for (path, text) in product_sources() {
        let file = relative(&path);
        for name in global_state(&text) {
            if !allowed.iter().any(|(allowed_file, static_)| file == *allowed_file && name == *static_) {
                found.push((file.clone(), name));
            }
        }
    }
    assert!(found.is_empty(), "global mutable state: {found:?}");
}

/// The statics of `text` that are state (`static NAME`, as written): what
/// `state_is_owned_and_passed_never_global` allows only by name.
fn global_state(text: &str) -> Vec<String> {
    // What makes a static state: a type with interior mutability (a lazy
    // or once-set value is set by whoever comes first), or a thread-local.
    let mutable = [
        "Mutex",
        "RwLock",
        "RefCell",
        "Cell<",
        "Atomic",
        "OnceLock",
        "OnceCell",
        "LazyLock",
        "LazyCell",
        "TextEncoder",
    ];
    let thread_locals: Vec<(usize, usize)> = word_at(text, "thread_local")
        .into_iter()
        .map(|at| (at, item_end(text.as_bytes(), at + "thread_local!".len())))
        .collect();
    let mut found = Vec::new();
    for at in word_at(text, "static") {
        let line = text[..at].rsplit('\n').next().unwrap_or_default().trim_start();
        if text[..at].ends_with('\'') || line.starts_with("//") {
            continue;
        }
        // The declaration: its name and type, up to its value.
        let declaration = &text[at..];
        let declaration = &declaration[..declaration.find(['=', ';']).unwrap_or(declaration.len())];
        let thread_local = thread_locals.iter().any(|(from, to)| (*from..*to).contains(&at));
        if thread_local || mutable.iter().any(|m| declaration.contains(m)) {
            let name: String = declaration.chars().take_while(|c| *c != ':').collect();
            found.push(name.trim().to_string());
        }
    }
    found
}

#[test]
fn the_statics_check_finds_each_kind_of_global_state() {
    let planted = r#"
static ROOTS: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(Vec::new);
static CELL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
static COUNT: AtomicU64 = AtomicU64::new(0);
thread_local! {
    static LOCAL: u32 = 0;
}
static NAME: &str = "a constant";
// static COMMENTED: Mutex<u8>
fn lifetime(x: &'static str) {}
"#;
    assert_eq!(global_state(planted), ["static ROOTS", "static CELL", "static COUNT", "static LOCAL"]);
}

/// Where `word` occurs in `text` as a whole word.
fn word_at(text: &str, word: &str) -> Vec<usize> {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    text.match_indices(word)
        .map(|(at, _)| at)
        .filter(|at| !ident(text[..*at].chars().next_back()) && !ident(text[at + word.len()..].chars().next()))
        .collect()
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

/// The dependencies of a manifest's product sections (`[dependencies]`,
/// per-target ones too; not dev- or build-dependencies) that turn on a
/// `testing` feature.
fn product_deps_with_testing(manifest: &str) -> Vec<String> {
    let mut in_product = false;
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_product = line == "[dependencies]" || (line.starts_with("[target.") && line.ends_with(".dependencies]"));
            continue;
        }
        if in_product && !line.starts_with('#') && line.contains("\"testing\"") {
            found.push(line.split(" = ").next().unwrap_or(line).to_string());
        }
    }
    found
}

/// What only tests use stays out of the product: no product crate turns on
/// another's (or its own) `testing` feature but for its tests (ARCHITECTURE.md
/// invariant 23).
#[test]
fn no_product_build_turns_on_a_testing_feature() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for dir in product_crates() {
        let manifest = std::fs::read_to_string(root.join(&dir).join("Cargo.toml")).unwrap();
        found.extend(product_deps_with_testing(&manifest).into_iter().map(|dep| format!("{dir}: {dep}")));
    }
    assert!(found.is_empty(), "product dependencies with their testing feature on: {found:?}");
    let planted = "[dependencies]\ncdp-client = { path = \"../cdp-client\", features = [\"testing\"] }\n\
                   # x = { features = [\"testing\"] }\n[dev-dependencies]\nme = { path = \".\", features = [\"testing\"] }\n\
                   [target.'cfg(unix)'.dependencies]\nnix = { version = \"1\", features = [\"testing\"] }\n";
    assert_eq!(product_deps_with_testing(planted), ["cdp-client", "nix"]);
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
        // A crate's dev-dependency on itself turns on its `testing`
        // feature for its own tests: not an edge of the map.
        let mut deps: Vec<String> = manifest
            .lines()
            .filter(|line| line.contains("path = ") && !line.contains(r#"path = ".""#))
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
        for (path, code, unit_tests) in split_files(rust_files(&root.join(dir), descend)) {
            let in_tests = path.components().any(|c| matches!(c.as_os_str().to_str(), Some("tests" | "benches")));
            if in_tests {
                tests.push_str(&code);
            } else {
                product.push_str(&code);
            }
            tests.push_str(&unit_tests);
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

/// Every `.rs` file of the workspace (product, tests, benches, the e2e
/// crate), its path relative to the workspace, with `/`, and its text.
fn workspace_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let descend = |path: &Path| {
        let name = file_name(path);
        !name.starts_with('.') && !matches!(name, "target" | "node_modules" | "pkg")
    };
    let mut files: Vec<(String, String)> = rust_files(&root, descend)
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(&root).unwrap().components();
            let relative: Vec<&str> = relative.map(|c| c.as_os_str().to_str().unwrap()).collect();
            (relative.join("/"), std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// The code that docs cite, to resolve their citations against.
struct Code {
    /// (path, text) of every `.rs` file.
    files: Vec<(String, String)>,
    /// (folder, crate name as code spells it: `relay_engine`) of every crate.
    crates: Vec<(String, String)>,
    /// For each name, the (file, kind: `fn`, `struct`, …) of each item so called.
    items: std::collections::HashMap<String, Vec<(usize, &'static str)>>,
}

/// Crates the docs name that are not ours.
const EXTERNAL: [&str; 12] = [
    "std",
    "core",
    "tokio",
    "subtle",
    "http_body_util",
    "hyper",
    "axum",
    "serde",
    "serde_json",
    "rustls",
    "libc",
    "windows_sys",
];

fn is_ident(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_type(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_uppercase())
}

/// Where `text` defines an item called `name` with one of `kinds` (`fn`, …).
fn definitions(text: &str, name: &str, kinds: &[&str]) -> Vec<usize> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    word_at(text, name)
        .into_iter()
        .filter(|at| {
            let before = text[..*at].trim_end();
            kinds.iter().any(|kind| before.strip_suffix(kind).is_some_and(|rest| !rest.ends_with(ident)))
        })
        .collect()
}

/// What defines a name: an item, or a re-export (`use a::b as name`).
const ITEMS: [&str; 12] =
    ["fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union", "macro_rules!", "impl", "as"];
const TYPES: [&str; 5] = ["struct", "enum", "trait", "type", "union"];

impl Code {
    fn read() -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut crates: Vec<(String, String)> = product_crates()
            .into_iter()
            .chain(["tests".to_string()])
            .map(|dir| {
                let manifest = std::fs::read_to_string(root.join(&dir).join("Cargo.toml")).unwrap();
                let line = manifest.lines().find(|l| l.starts_with("name = ")).expect("a package name");
                (dir, line.trim_start_matches("name = ").trim_matches('"').replace('-', "_"))
            })
            .collect();
        // The deepest folder first: `relay/grants/…` is not the binary's.
        crates.sort_by_key(|(dir, _)| std::cmp::Reverse(dir.len()));
        let files = workspace_sources();
        let mut items: std::collections::HashMap<String, Vec<(usize, &'static str)>> = Default::default();
        for (file, (_, text)) in files.iter().enumerate() {
            let words: Vec<&str> = text
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '!'))
                .filter(|word| !word.is_empty())
                .collect();
            for pair in words.windows(2) {
                if let Some(kind) = ITEMS.iter().find(|kind| **kind == pair[0]) {
                    items.entry(pair[1].to_string()).or_default().push((file, kind));
                }
            }
        }
        Self { files, crates, items }
    }

    fn crate_of(&self, file: usize) -> &str {
        let path = &self.files[file].0;
        self.crates.iter().find(|(dir, _)| path.starts_with(&format!("{dir}/"))).map_or("", |(dir, _)| dir)
    }

    /// The files a cited `.rs` path names: itself, or every file whose path
    /// ends with it (`client.rs`, `core/tests.rs`).
    fn files_named(&self, cited: &str) -> Vec<usize> {
        let exact: Vec<usize> = (0..self.files.len()).filter(|i| self.files[*i].0 == cited).collect();
        if !exact.is_empty() {
            return exact;
        }
        (0..self.files.len()).filter(|i| self.files[*i].0.ends_with(&format!("/{cited}"))).collect()
    }

    /// The files of module or crate `name` among `scope`: a crate of that
    /// name, a `name.rs` or `name/` folder, or a file with an inline `mod name`.
    fn module(&self, scope: &[usize], name: &str) -> Vec<usize> {
        let krate = self.crates.iter().find(|(_, krate)| krate == name).map(|(dir, _)| dir.as_str());
        scope
            .iter()
            .copied()
            .filter(|i| {
                let path = &self.files[*i].0;
                Some(self.crate_of(*i)) == krate
                    || path.ends_with(&format!("/{name}.rs"))
                    || path.contains(&format!("/{name}/"))
                    || self.defines(&[*i], name, &["mod"])
            })
            .collect()
    }

    fn defines(&self, scope: &[usize], name: &str, kinds: &[&str]) -> bool {
        self.items.get(name).is_some_and(|items| items.iter().any(|(f, k)| scope.contains(f) && kinds.contains(k)))
    }

    /// `Type::member`: a type of that name in `scope`, and in its crate a
    /// `fn` or `const` called `member`, or `member` in the type's body (a
    /// field, a variant, a trait's method).
    fn member(&self, scope: &[usize], ty: &str, member: &str) -> Result<(), String> {
        let homes: Vec<usize> = scope.iter().copied().filter(|i| self.defines(&[*i], ty, &TYPES)).collect();
        if homes.is_empty() {
            return Err(format!("no type {ty}"));
        }
        for home in homes {
            let text = &self.files[home].1;
            for at in definitions(text, ty, &TYPES) {
                let body = &text[at..item_end(text.as_bytes(), at)];
                if !word_at(body, member).is_empty() {
                    return Ok(());
                }
            }
            let krate = self.crate_of(home);
            let crate_files: Vec<usize> = (0..self.files.len()).filter(|i| self.crate_of(*i) == krate).collect();
            if self.defines(&crate_files, member, &["fn", "const"]) {
                return Ok(());
            }
        }
        Err(format!("{ty} has no {member}"))
    }

    /// Resolves `segments` (a citation split at `::`) from `scope`: the
    /// files that hold what it names.
    fn path(&self, mut scope: Vec<usize>, segments: &[&str]) -> Result<Vec<usize>, String> {
        for (i, segment) in segments.iter().enumerate() {
            if matches!(*segment, "*" | "…") {
                break;
            }
            if i + 1 == segments.len() {
                // `{a, b (a remark)}`: each name.
                let mut names = String::new();
                let mut depth = 0;
                for c in segment.trim_matches(['{', '}']).chars() {
                    depth += i32::from(c == '(') - i32::from(c == ')');
                    if depth == 0 && c != ')' {
                        names.push(c);
                    }
                }
                let names: Vec<&str> = names.split(',').map(str::trim).collect();
                let missing: Vec<&str> = names.iter().copied().filter(|n| !self.defines(&scope, n, &ITEMS)).collect();
                if !missing.is_empty() {
                    return Err(format!("nothing called {}", missing.join(", ")));
                }
                scope.retain(|f| names.iter().any(|n| self.defines(&[*f], n, &ITEMS)));
                break;
            }
            if is_type(segment) {
                self.member(&scope, segment, segments[i + 1])?;
                break;
            }
            if *segment != "tests" {
                scope = self.module(&scope, segment);
                if scope.is_empty() {
                    return Err(format!("no module {segment}"));
                }
            }
        }
        Ok(scope)
    }
}

/// The code that `doc` cites and cannot be found, each as `line: citation:
/// why`. A citation is a code span (in backticks) of one of these forms:
/// - a `.rs` path (`relay/src/http.rs`, `core/tests.rs`, `client.rs`): some
///   file has it;
/// - a path and an item (`relay/src/http.rs::tests::name`, a test;
///   `….rs::{a, b}`): the file defines it (`fn name`, `struct name`, …);
/// - a `.rs` path then, with only space between, a name (`client.rs`
///   `forward`): the file defines it;
/// - a Rust path (`browser_domain::wipe_refusal`, `relay_engine::extension_key`,
///   `net::ui_logins::UiLogins::admit`): its modules (a crate, a file or an
///   inline `mod`) hold it; `Type::member`: the type is ours, and its crate
///   has a `fn member` or its body names `member` (a field, a variant);
/// - `…::name`, a name in a file of one of the few citations before it (a
///   path, a Rust path or a test's lone name; the file cited first in a
///   list of tests from several files may be a few citations back).
///
/// Not checked, too ambiguous to tell from prose: a lone name in backticks
/// (`serve`, `stop` are words too), files that are not `.rs`, call
/// expressions (`on_timer(Timer::DetachGrace)`), and paths into crates that
/// are not ours (`EXTERNAL`).
fn unresolved_citations(code: &Code, doc: &str) -> Vec<String> {
    const RECENT: usize = 6;
    // Fenced blocks (diagrams, shell) are not citations; their lines stay.
    let mut fenced = false;
    let text: Vec<&str> = doc
        .lines()
        .map(|line| {
            let fence = line.trim_start().starts_with("```");
            fenced ^= fence;
            if fenced || fence { "" } else { line }
        })
        .collect();
    let text = text.join("\n");
    let everything: Vec<usize> = (0..code.files.len()).collect();
    let mut problems = Vec::new();
    // The files of the last few citations, for `…::name`.
    let mut recent: Vec<Vec<usize>> = Vec::new();
    // A lone `.rs` path just before, with only space since: (its files, it).
    let mut file_before: Option<(Vec<usize>, String)> = None;
    let mut offset = 0;
    for (i, part) in text.split('`').enumerate() {
        let at = offset;
        offset += part.len() + 1;
        if i % 2 == 0 {
            if !part.trim().is_empty() {
                file_before = None;
            }
            continue;
        }
        let line = text[..at].lines().count().max(1);
        let span: String = part.split_whitespace().collect::<Vec<_>>().join(" ");
        // `InFlight::try_start(max_in_flight)`: the path before the arguments.
        let cited = span.split_once('(').filter(|_| span.ends_with(')')).map_or(span.as_str(), |(path, _)| path);
        let segments: Vec<&str> = cited.split("::").collect();
        let first = segments[0];
        let path_like = first.ends_with(".rs")
            && first.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/' | '.'));
        let code_like = segments.iter().all(|s| is_ident(s) || matches!(*s, "*" | "…") || s.starts_with('{'))
            && (!cited.contains(' ') || cited.contains('{'));
        let before = file_before.take();
        let found = if path_like {
            let files = code.files_named(first);
            if files.is_empty() {
                Err("no such file".to_string())
            } else if segments.len() == 1 {
                file_before = Some((files.clone(), first.to_string()));
                Ok(files)
            } else {
                code.path(files, &segments[1..]).map_err(|why| format!("{why} in {first}"))
            }
        } else if first == "…" && segments.len() > 1 {
            let before = recent.iter().rev().take(RECENT);
            before
                .map(|files| code.path(files.clone(), &segments[1..]))
                .find(Result::is_ok)
                .unwrap_or_else(|| Err(format!("not in the files of the {RECENT} citations before it")))
        } else if !code_like {
            // Not code: `/json/*`, `[::1]`, `cdpPort = 9222`.
            continue;
        } else if segments.len() == 1 {
            match before {
                Some((files, file)) => code.path(files, &segments).map_err(|why| format!("{why} in {file}")),
                // A lone name: a word as often as code. A test's name (one
                // `fn` in the workspace) still tells `…::` where it is.
                None => {
                    let homes: Vec<usize> =
                        everything.iter().copied().filter(|f| code.defines(&[*f], first, &["fn"])).collect();
                    Ok(if homes.len() == 1 { homes } else { Vec::new() })
                }
            }
        } else if EXTERNAL.contains(&first) {
            continue;
        } else {
            code.path(everything.clone(), &segments)
        };
        match found {
            Ok(files) if !files.is_empty() => recent.push(files),
            Ok(_) => {}
            Err(why) => problems.push(format!("{line}: `{span}`: {why}")),
        }
    }
    problems
}

#[test]
fn the_docs_cite_code_that_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let code = Code::read();
    let mut problems = Vec::new();
    for doc in ["ARCHITECTURE.md", "SECURITY.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        problems.extend(unresolved_citations(&code, &text).into_iter().map(|p| format!("{doc}:{p}")));
    }
    assert!(problems.is_empty(), "citations of code that is not there:\n{}", problems.join("\n"));
}

#[test]
fn the_citation_check_finds_what_is_not_there() {
    let code = Code::read();
    let doc = "Where: `client.rs` `root_command`; `Engine::act`, `relay/nowhere.rs`,
`policy::no_such_rule`, `tests/tests/security.rs::no_such_test`, `…::nor_this` and
`NoSuchType::method`.

`…::orphan`.

Fine: `Guard::check`, `serve`, `/json/list`, `std::process::Command`, `relay/src/http.rs`
`router`, `policy::is_restricted`, `relay/state-dir/src/dir.rs::tests::{token_file_is_created_once_with_mode_0600,
malformed_token_file_is_a_clear_error (a remark, with a comma)}`, `…::token_matching_is_exact_and_debug_redacts`,
`on_timer(Timer::DetachGrace)`, `Target::grant`, `ConfigError::Read`.
";
    let found = unresolved_citations(&code, doc);
    let cited: Vec<&str> = found.iter().map(|p| p.split('`').nth(1).unwrap()).collect();
    assert_eq!(
        cited,
        [
            "root_command",
            "Engine::act",
            "relay/nowhere.rs",
            "policy::no_such_rule",
            "tests/tests/security.rs::no_such_test",
            "…::nor_this",
            "NoSuchType::method",
            "…::orphan"
        ],
        "{found:#?}"
    );
}

#[test]
fn the_test_skipper_reads_rust_not_text() {
    let text = r##"fn product() { let _ = "#[cfg(test)] mod fake {"; let _ = '{'; }
// #[cfg(test)] in a comment
#[cfg(test)]
fn helper() -> &'static str { r#"}"# }
#[cfg(test)]
use std::{fmt, io};
struct Kept { #[cfg(test)] seen: u8, kept: u8 }
/* a } in /* a nested */ comment */
#[cfg(test)]
mod tests {
    fn t() { let _ = "}"; let _ = '}'; let _ = b'\''; }
}
fn after() {}
"##;
    let (product, tests) = split_tests(text);
    for kept in [
        "fn product",
        "mod fake {",
        "in a comment",
        "struct Kept {",
        "kept: u8 }",
        "nested */ comment */",
        "fn after() {}",
    ] {
        assert!(product.contains(kept), "{kept} in {product}");
    }
    for gone in ["fn helper", "use std", "seen", "mod tests", "fn t()"] {
        assert!(!product.contains(gone) && tests.contains(gone), "{gone} in {product}");
    }
}

/// The most lines a product function may span, from the line of its `fn` to
/// the line of its closing brace: a longer one is split into helpers named
/// for what they do.
const MAX_FN_LINES: usize = 80;

/// Every function with a body in `text` (methods and nested ones too, not
/// closures) that spans more than `limit` lines, as (name, lines), found by
/// the scan that skips strings, characters and comments (`literal_end`).
fn long_functions(text: &str, limit: usize) -> Vec<(String, usize)> {
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut long = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if let Some(end) = literal_end(bytes, at) {
            at = end;
            continue;
        }
        let is_fn = bytes[at..].starts_with(b"fn")
            && (at == 0 || !ident(bytes[at - 1]))
            && bytes.get(at + 2).is_some_and(|b| b.is_ascii_whitespace());
        if !is_fn {
            at += 1;
            continue;
        }
        let start = at;
        at += 2;
        at += bytes[at..].iter().take_while(|b| b.is_ascii_whitespace()).count();
        let name_len = bytes[at..].iter().take_while(|b| ident(**b)).count();
        let name = &text[at..at + name_len];
        at += name_len;
        if let Some((open, close)) = fn_body(bytes, at) {
            let lines = text[start..close].matches('\n').count() + 1;
            if lines > limit {
                long.push((name.to_string(), lines));
            }
            // Go on inside the body, for the functions nested in it.
            at = open + 1;
        }
    }
    long
}

/// Where the body of the function whose signature goes on at `at` opens and
/// where it closes (at its `}`), or `None` for a declaration with no body
/// (`fn name(…);`).
fn fn_body(bytes: &[u8], mut at: usize) -> Option<(usize, usize)> {
    let mut depth = 0i32;
    let mut open = None;
    while at < bytes.len() {
        if let Some(end) = literal_end(bytes, at) {
            at = end;
            continue;
        }
        match (bytes[at], open) {
            (b'(' | b'[', None) => depth += 1,
            (b')' | b']', None) => depth -= 1,
            (b';', None) if depth == 0 => return None,
            (b'{', None) if depth == 0 => (open, depth) = (Some(at), 1),
            (b'{', Some(_)) => depth += 1,
            (b'}', Some(start)) => {
                depth -= 1;
                if depth == 0 {
                    return Some((start, at));
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// What breaks the function-length rule in `sources` (relative path, text):
/// each function over `limit` lines.
fn function_length_problems(sources: &[(String, String)], limit: usize) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, text) in sources {
        for (name, lines) in long_functions(text, limit) {
            problems.push(format!("{path}: fn {name}: {lines} lines (over {limit})"));
        }
    }
    problems
}

#[test]
fn no_product_function_is_over_80_lines() {
    let sources: Vec<(String, String)> =
        product_sources().into_iter().map(|(path, text)| (relative(&path), text)).collect();
    let problems = function_length_problems(&sources, MAX_FN_LINES);
    assert!(problems.is_empty(), "functions over {MAX_FN_LINES} lines:\n{}", problems.join("\n"));
}

#[test]
fn the_function_length_check_finds_a_planted_long_function() {
    // A function of `lines` lines whose body holds a string with a `}`, then
    // `extra` inside it, a trait method with no body and a closure.
    let function = |name: &str, lines: usize, extra: &str| {
        let mut text = format!("pub(crate) async fn {name}<T: Fn(u8) -> u8>(f: T) -> &'static str {{\n");
        text += "    let _ = \"} fn fake() {\"; let _ = '}'; // } in a comment\n";
        text += extra;
        text += &"    let _ = |x: u8| { x };\n".repeat(lines - 4 - extra.lines().count());
        text += "    r#\"}\"#\n}\n";
        text
    };
    let nested = "    fn nested() {\n    }\n";
    let text = [
        "trait Shape { fn area(&self) -> f64; }\n".to_string(),
        function("long_one", MAX_FN_LINES + 1, nested),
        function("exactly_at_the_limit", MAX_FN_LINES, ""),
        "/* fn in_a_comment() {\n } */\nfn short(f: fn(u8) -> u8) -> u8 { f(1) }\n".to_string(),
    ]
    .concat();
    assert_eq!(long_functions(&text, MAX_FN_LINES), [("long_one".to_string(), MAX_FN_LINES + 1)]);
    let sources = [("a.rs".to_string(), text)];
    assert_eq!(function_length_problems(&sources, MAX_FN_LINES), ["a.rs: fn long_one: 81 lines (over 80)"]);
}
