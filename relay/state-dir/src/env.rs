//! The environment variable that names the state directory, and the path
//! it names as Windows' cmd leaves it.

use std::path::PathBuf;

/// Name of the environment variable that overrides the state directory.
pub const HOME_ENV: &str = "BROWSER_RELAY_HOME";

/// A path an environment variable names, without what Windows' cmd keeps
/// around it: `set NAME="C:\Program Files\…" && …` stores the quotes and
/// the space before `&&`. No Windows file name holds a `"` or ends in a
/// space, so a pair of quotes around the whole value is dropped.
pub fn path_from_env(value: std::ffi::OsString) -> PathBuf {
    let unquoted = value
        .to_str()
        .map(str::trim_end)
        .and_then(|text| text.strip_prefix('"'))
        .and_then(|text| text.strip_suffix('"'))
        .filter(|inner| !inner.is_empty())
        .map(PathBuf::from);
    unquoted.unwrap_or_else(|| PathBuf::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quotes_cmds_set_keeps_around_a_path_are_not_part_of_it() {
        let chrome = r"C:\Program Files\Google\Chrome\Application\chrome.exe";
        // `set NAME="…"`, and `set NAME="…" && next` (the space before && kept).
        for value in [format!("\"{chrome}\""), format!("\"{chrome}\" ")] {
            assert_eq!(path_from_env(value.clone().into()), PathBuf::from(chrome), "{value:?}");
        }
        assert_eq!(path_from_env(chrome.into()), PathBuf::from(chrome), "a plain value as it is");
        for odd in ["\"", "\"\"", "\"C:\\chrome.exe", "/opt/my \"chrome\""] {
            assert_eq!(path_from_env(odd.into()), PathBuf::from(odd), "{odd}: not a pair of quotes around a path");
        }
    }
}
