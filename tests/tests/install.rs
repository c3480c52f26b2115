//! `install.sh` and `install.ps1`, the one-line installs (issue 45), against
//! a release folder made here and served over HTTP on loopback, as
//! `scripts/package.sh` lays out `dist/`: `SHA256SUMS` and the archives.
//!
//! `install.sh` runs under `dash` (a strict POSIX `sh`) where there is one.
//! No PowerShell runs here (neither Wine's nor `pwsh`): `install.ps1` is
//! checked for what can be read from it; docs/platforms.md says so.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::routing::get;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the repository").to_path_buf()
}

/// This machine as package.sh names its archives.
fn platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "macos",
        _ => "linux",
    };
    format!("{os}-{}", std::env::consts::ARCH)
}

/// `browser-relay-<version>-<platform>.tar.gz` in `release`, holding a
/// stand-in program that prints its version, the extension and
/// INSTALL.txt, in the archive's one folder, as package.sh packs them.
fn pack(release: &Path, version: &str, platform: &str) -> String {
    let name = format!("browser-relay-{version}-{platform}");
    let stage = tempfile::tempdir().unwrap();
    let folder = stage.path().join(&name);
    std::fs::create_dir_all(folder.join("extension/pkg")).unwrap();
    let program = folder.join("browser-relay");
    std::fs::write(&program, format!("#!/bin/sh\necho \"browser-relay {version} (stand-in)\"\n")).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(folder.join("extension/manifest.json"), format!("{{\"version\": \"{version}\"}}\n")).unwrap();
    std::fs::write(folder.join("extension/pkg/core.wasm"), b"\0asm").unwrap();
    std::fs::write(folder.join("INSTALL.txt"), "Browser Relay\n").unwrap();
    let archive = format!("{name}.tar.gz");
    let status = std::process::Command::new("tar")
        .arg("-C")
        .arg(stage.path())
        .arg("-czf")
        .arg(release.join(&archive))
        .arg(&name)
        .status()
        .expect("tar runs");
    assert!(status.success());
    archive
}

/// `sha256sum`'s lines for every file of `release` (what package.sh writes).
fn write_sums(release: &Path) {
    let mut names: Vec<String> = std::fs::read_dir(release)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "SHA256SUMS")
        .collect();
    names.sort();
    let out =
        std::process::Command::new("sha256sum").args(&names).current_dir(release).output().expect("sha256sum runs");
    assert!(out.status.success());
    std::fs::write(release.join("SHA256SUMS"), out.stdout).unwrap();
}

/// A release folder: this machine's archive of 0.9.0 and 0.10.0 (the
/// newest, by number, not by text), and others the script must pass over.
fn release_folder() -> tempfile::TempDir {
    let release = tempfile::tempdir().unwrap();
    let platform = platform();
    pack(release.path(), "0.9.0", &platform);
    pack(release.path(), "0.10.0", &platform);
    let other = if platform.ends_with("x86_64") {
        platform.replace("x86_64", "aarch64")
    } else {
        platform.replace("aarch64", "x86_64")
    };
    pack(release.path(), "0.11.0", &other);
    for decoy in [
        "browser-relay-0.10.0-windows-x86_64.zip",
        "browser-relay-extension-0.10.0-store.zip",
        "browser-relay-0.10.0-symbols.tar.gz",
        format!("browser-relay-0.10.0-{platform}-symbols.tar.gz").as_str(),
    ] {
        std::fs::write(release.path().join(decoy), decoy).unwrap();
    }
    write_sums(release.path());
    release
}

/// Serves `folder`'s files at `/<name>` on 127.0.0.1, port 0; the URL.
async fn serve(folder: PathBuf) -> String {
    async fn file(State(folder): State<PathBuf>, UrlPath(name): UrlPath<String>) -> Result<Vec<u8>, StatusCode> {
        if name.contains('/') || name.starts_with('.') {
            return Err(StatusCode::NOT_FOUND);
        }
        tokio::fs::read(folder.join(name)).await.map_err(|_| StatusCode::NOT_FOUND)
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}/", listener.local_addr().unwrap().port());
    let app = Router::new().route("/{name}", get(file)).with_state(folder);
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// `install.sh ARGS` under dash (or sh), with a PATH that does not hold
/// the prefix.
async fn install_sh(args: &[&str]) -> Output {
    let shell = if Path::new("/bin/dash").exists() { "/bin/dash" } else { "/bin/sh" };
    tokio::process::Command::new(shell)
        .arg(repo_root().join("install.sh"))
        .args(args)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .await
        .expect("the shell runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(program: &Path) -> String {
    let out = std::process::Command::new(program).output().expect("the installed program runs");
    assert!(out.status.success());
    text(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn install_sh_installs_the_newest_release_for_this_machine_and_says_where_the_extension_is() {
    let release = release_folder();
    let url = serve(release.path().to_path_buf()).await;
    let home = tempfile::tempdir().unwrap();
    let prefix = home.path().join("my prefix");
    let out = install_sh(&["--base-url", &url, "--prefix", prefix.to_str().unwrap()]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    let program = prefix.join("bin/browser-relay");
    assert_eq!(run(&program), "browser-relay 0.10.0 (stand-in)", "the newest by number: 0.10.0 over 0.9.0");
    let extension = prefix.join("share/browser-relay/extension");
    assert!(extension.join("manifest.json").is_file() && extension.join("pkg/core.wasm").is_file());
    assert!(stdout.contains(&format!("the extension: {}", extension.display())), "{stdout}");
    assert!(stdout.contains("is not on your PATH"), "a PATH hint: {stdout}");
    // Nothing of the install's own is left beside what it installed.
    let left: Vec<_> = std::fs::read_dir(prefix.join("bin")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["browser-relay"]);

    // --version: that one, over the newer one in place (the extension too).
    let out = install_sh(&["--base-url", &url, "--prefix", prefix.to_str().unwrap(), "--version", "0.9.0"]).await;
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(run(&program), "browser-relay 0.9.0 (stand-in)");
    assert!(std::fs::read_to_string(extension.join("manifest.json")).unwrap().contains("0.9.0"));

    // A version the release does not have for this machine.
    let out = install_sh(&["--base-url", &url, "--prefix", prefix.to_str().unwrap(), "--version", "0.11.0"]).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains(&format!("lists no browser-relay 0.11.0 for {}", platform())),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(run(&program), "browser-relay 0.9.0 (stand-in)");
}

#[tokio::test(flavor = "multi_thread")]
async fn install_sh_refuses_a_tampered_archive_and_installs_nothing() {
    let release = release_folder();
    let url = serve(release.path().to_path_buf()).await;
    let home = tempfile::tempdir().unwrap();

    // One byte of the newest archive changed after SHA256SUMS was written.
    let archive = release.path().join(format!("browser-relay-0.10.0-{}.tar.gz", platform()));
    let mut bytes = std::fs::read(&archive).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&archive, bytes).unwrap();

    let fresh = home.path().join("fresh");
    let out = install_sh(&["--base-url", &url, "--prefix", fresh.to_str().unwrap()]).await;
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert!(
        stderr.contains("does not match SHA256SUMS") && stderr.contains("nothing was installed"),
        "a clear refusal: {stderr}"
    );
    assert!(!fresh.exists(), "nothing at all in the prefix");

    // Over an install already there: it stays as it was.
    let kept = home.path().join("kept");
    let out = install_sh(&["--base-url", &url, "--prefix", kept.to_str().unwrap(), "--version", "0.9.0"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = install_sh(&["--base-url", &url, "--prefix", kept.to_str().unwrap()]).await;
    assert!(!out.status.success());
    assert_eq!(run(&kept.join("bin/browser-relay")), "browser-relay 0.9.0 (stand-in)");
    let manifest = std::fs::read_to_string(kept.join("share/browser-relay/extension/manifest.json")).unwrap();
    assert!(manifest.contains("0.9.0"), "{manifest}");
    let left: Vec<_> =
        std::fs::read_dir(kept.join("share/browser-relay")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 2, "extension/ and INSTALL.txt, nothing half-made: {left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn install_sh_refuses_an_archive_sha256sums_does_not_list() {
    let release = tempfile::tempdir().unwrap();
    pack(release.path(), "0.10.0", &platform());
    std::fs::write(release.path().join("SHA256SUMS"), "").unwrap();
    let url = serve(release.path().to_path_buf()).await;
    let home = tempfile::tempdir().unwrap();
    let prefix = home.path().join("p");
    let out = install_sh(&["--base-url", &url, "--prefix", prefix.to_str().unwrap()]).await;
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("lists no browser-relay for"), "{}", text(&out.stderr));
    assert!(!prefix.exists());
}

/// No PowerShell runs here: what can be checked of install.ps1 without one.
/// It picks the archive package.sh names for Windows, checks it before it
/// unpacks anything, and takes the same options as install.sh.
#[test]
fn install_ps1_takes_the_archive_package_sh_names_and_checks_it_first() {
    let script = std::fs::read_to_string(repo_root().join("install.ps1")).unwrap();
    // package.sh (and package-native.sh) name their archives in archive.sh.
    let package = std::fs::read_to_string(repo_root().join("scripts/archive.sh")).unwrap();
    assert!(package.contains("windows") && package.contains("\"$name.zip\""), "package.sh's Windows archive");
    assert!(script.contains(r#"'^browser-relay-(?<version>[0-9][^\s]*)-windows-x86_64\.zip$'"#), "its pattern");
    for option in ["$BaseUrl", "$Version", "$Prefix"] {
        assert!(script.contains(option), "{option}");
    }
    let at = |needle: &str| script.find(needle).unwrap_or_else(|| panic!("install.ps1 has no {needle}"));
    assert!(at("Get-FileHash") < at("Expand-Archive"), "checked before it is unpacked");
    assert!(at("does not match SHA256SUMS") < at("Expand-Archive"));
    assert!(script.contains("Programs\\browser-relay"), "%LOCALAPPDATA%\\Programs\\browser-relay");
    assert!(script.contains("SetEnvironmentVariable('Path'"), "the user's PATH");
    // Both scripts name the same releases page.
    let releases = |text: &str| {
        let start = text.find("https://github.com/").expect("a releases URL");
        text[start..].split(['"', '\'']).next().unwrap().trim_end_matches('/').to_string()
    };
    let sh = std::fs::read_to_string(repo_root().join("install.sh")).unwrap();
    let sh_releases = sh.lines().find(|l| l.starts_with("RELEASES=")).map(releases).expect("RELEASES= in install.sh");
    let ps_releases = script
        .lines()
        .find(|l| l.trim_start().starts_with("$Releases ="))
        .map(releases)
        .expect("$Releases = in install.ps1");
    assert_eq!(sh_releases, ps_releases);
}

/// package.sh's Homebrew formula and Scoop manifest: each archive's URL and
/// SHA-256, valid JSON (and Ruby, where `ruby -c` can say).
#[test]
fn the_homebrew_formula_and_scoop_manifest_carry_each_archives_sha256() {
    let dist = tempfile::tempdir().unwrap();
    for name in [
        "browser-relay-1.2.3-linux-x86_64.tar.gz",
        "browser-relay-1.2.3-macos-aarch64.tar.gz",
        "browser-relay-1.2.3-windows-x86_64.zip",
    ] {
        std::fs::write(dist.path().join(name), name).unwrap();
    }
    write_sums(dist.path());
    let sums = std::fs::read_to_string(dist.path().join("SHA256SUMS")).unwrap();
    let sum_of =
        |name: &str| sums.lines().find(|l| l.ends_with(name)).unwrap().split_whitespace().next().unwrap().to_string();
    let base = "https://example.invalid/releases/download/v1.2.3";
    let status = std::process::Command::new("python3")
        .arg(repo_root().join("scripts/release-manifests.py"))
        .arg(dist.path())
        .args(["1.2.3", base])
        .status()
        .expect("python3 runs");
    assert!(status.success());

    let scoop: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dist.path().join("browser-relay.json")).unwrap()).unwrap();
    assert_eq!(scoop["version"], "1.2.3");
    let windows = &scoop["architecture"]["64bit"];
    assert_eq!(windows["url"], format!("{base}/browser-relay-1.2.3-windows-x86_64.zip"));
    assert_eq!(windows["hash"], sum_of("browser-relay-1.2.3-windows-x86_64.zip"));
    assert_eq!(windows["extract_dir"], "browser-relay-1.2.3-windows-x86_64");
    assert_eq!(scoop["bin"], "browser-relay.exe");

    let formula = std::fs::read_to_string(dist.path().join("browser-relay.rb")).unwrap();
    for name in ["browser-relay-1.2.3-linux-x86_64.tar.gz", "browser-relay-1.2.3-macos-aarch64.tar.gz"] {
        let url = formula.find(&format!("url \"{base}/{name}\"")).unwrap_or_else(|| panic!("{name} in {formula}"));
        assert!(formula[url..].lines().nth(1).unwrap().contains(&format!("sha256 \"{}\"", sum_of(name))), "{formula}");
    }
    assert!(
        !formula.contains("linux-aarch64")
            && !formula.contains(
                "on_intel do\n      url \"https://example.invalid/releases/download/v1.2.3/browser-relay-1.2.3-macos"
            )
    );
    if let Ok(out) = std::process::Command::new("ruby").arg("-c").arg(dist.path().join("browser-relay.rb")).output() {
        assert!(out.status.success(), "ruby -c: {}", text(&out.stderr));
    }
}
