//! Files and folders only their owner can read: the one seam between the
//! state directory and each system's permissions.
//!
//! | | Unix (Linux, macOS) | Windows |
//! |---|---|---|
//! | a private folder | mode 0700 | a protected DACL (nothing inherited from above) with one entry: full control for the user, inherited by what is created in it |
//! | a private file | mode 0600, set as it is created | the same DACL, set before anything is written |
//! | private enough | no bit for group or others | every allow entry is for the user or the system's own accounts |
//!
//! The rules are plain data and functions, tested on every host; applying
//! them needs the system ([`unix`] or [`windows`]).

use std::fs::{self, File};
use std::io;
use std::path::Path;

// Each system's rules are compiled on every host, so that their tests run
// everywhere; each system applies only its own.

/// The mode of a private folder on Unix.
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) const DIR_MODE: u32 = 0o700;
/// The mode of a private file on Unix.
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) const FILE_MODE: u32 = 0o600;

/// Whether a Unix mode lets only its owner in.
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) fn mode_is_private(mode: u32) -> bool {
    mode & 0o077 == 0
}

/// The Windows security descriptor of a private file or folder for the
/// user `user_sid`, in SDDL: a protected DACL (`P`: nothing inherited from
/// the folder above) with one allow entry (`A`) of full access (`FA`) for
/// that user, inherited by files (`OI`) and folders (`CI`) made in it.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn owner_only_sddl(user_sid: &str) -> String {
    format!("D:P(A;OICI;FA;;;{user_sid})")
}

/// Whether a DACL in SDDL (as Windows reads it back: `D:`, flags, then
/// `(…)` entries) lets in no one but the user `user_sid`: every allow
/// entry is for that user, the object's owner (`OW`), or the system's own
/// accounts (`SY`, LocalSystem; `BA`, Administrators), which can read any
/// file anyway by taking it over (a user's profile folder has the same
/// entries). Deny entries only take access away.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn dacl_is_private(sddl: &str, user_sid: &str) -> bool {
    let Some(dacl) = sddl.split_once("D:").map(|(_, d)| d) else { return false };
    // The DACL ends where an SACL would begin.
    let dacl = dacl.split_once("S:").map_or(dacl, |(d, _)| d);
    let Some((_flags, entries)) = dacl.split_once('(') else {
        // "D:NO_ACCESS_CONTROL", or no DACL: everyone is let in.
        return dacl.starts_with('P') && dacl.len() <= 3;
    };
    entries.split('(').all(|entry| {
        let fields: Vec<&str> = entry.trim_end_matches(')').split(';').collect();
        match fields.as_slice() {
            [kind, .., sid] if kind.ends_with('A') => ["OW", "SY", "BA", user_sid].contains(sid),
            [_, ..] => true,
            [] => false,
        }
    })
}

/// Creates `dir` (and its parents) and makes it private.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    os::make_private(dir, true)
}

/// Makes an existing folder private if it is not.
pub(crate) fn tighten_dir(dir: &Path) -> io::Result<()> {
    if os::describe_if_open(dir)?.is_some() {
        os::make_private(dir, true)?;
    }
    Ok(())
}

/// Makes an existing file private if it is not; what it was (for a
/// warning) when it had to.
pub(crate) fn tighten_file(path: &Path) -> io::Result<Option<String>> {
    let was = os::describe_if_open(path)?;
    if was.is_some() {
        os::make_private(path, false)?;
    }
    Ok(was)
}

/// Creates `path`, which must not exist, private before anything is
/// written to it: no moment in which another user could read it.
pub(crate) fn create_new_private(path: &Path) -> io::Result<File> {
    os::create_new_private(path)
}

#[cfg(unix)]
mod os {
    use std::fs::{self, File};
    use std::io;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    use std::path::Path;

    pub(super) fn make_private(path: &Path, dir: bool) -> io::Result<()> {
        fs::set_permissions(path, fs::Permissions::from_mode(if dir { super::DIR_MODE } else { super::FILE_MODE }))
    }

    /// `None` when private; else its mode, as `ls` would print it.
    pub(super) fn describe_if_open(path: &Path) -> io::Result<Option<String>> {
        let mode = fs::metadata(path)?.permissions().mode() & 0o777;
        Ok((!super::mode_is_private(mode)).then(|| format!("mode {mode:o}")))
    }

    pub(super) fn create_new_private(path: &Path) -> io::Result<File> {
        fs::OpenOptions::new().write(true).create_new(true).mode(super::FILE_MODE).open(path)
    }
}

#[cfg(windows)]
mod os {
    //! The DACL calls (`windows-sys`; no maintained safe crate covers
    //! them), each on a path or a descriptor this module owns.
    #![allow(unsafe_code)]

    use std::fs::File;
    use std::io;
    use std::os::windows::ffi::OsStrExt;
    use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
    use std::path::Path;

    use windows_sys::Win32::Foundation::{HANDLE, LocalFree, WIN32_ERROR};
    use windows_sys::Win32::Security::Authorization::{
        ConvertSecurityDescriptorToStringSecurityDescriptorW, ConvertSidToStringSidW,
        ConvertStringSecurityDescriptorToSecurityDescriptorW, GetNamedSecurityInfoW, SDDL_REVISION_1, SE_FILE_OBJECT,
    };
    use windows_sys::Win32::Security::{
        DACL_SECURITY_INFORMATION, GetTokenInformation, PROTECTED_DACL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR,
        SetFileSecurityW, TOKEN_QUERY, TOKEN_USER, TokenUser,
    };
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

    fn wide(text: &std::ffi::OsStr) -> Vec<u16> {
        text.encode_wide().chain(Some(0)).collect()
    }

    fn check(error: WIN32_ERROR) -> io::Result<()> {
        match error {
            0 => Ok(()),
            code => Err(io::Error::from_raw_os_error(code as i32)),
        }
    }

    /// The SID of the user this process runs as, in SDDL's `S-1-…` form.
    pub(super) fn user_sid() -> io::Result<String> {
        let mut token: HANDLE = std::ptr::null_mut();
        // SAFETY: our own process's pseudo-handle; the token is closed below.
        if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &raw mut token) } == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh handle nobody else owns.
        let token = unsafe { OwnedHandle::from_raw_handle(token) };
        // TOKEN_USER and the SID it points to, in one buffer of u64s (aligned).
        let mut buffer = vec![0u64; 64];
        let mut length = 0u32;
        // SAFETY: the buffer is as large as the length given.
        let read = unsafe {
            GetTokenInformation(
                token.as_raw_handle(),
                TokenUser,
                buffer.as_mut_ptr().cast(),
                (buffer.len() * 8) as u32,
                &raw mut length,
            )
        };
        if read == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the call filled a TOKEN_USER at the buffer's start.
        let sid = unsafe { (*buffer.as_ptr().cast::<TOKEN_USER>()).User.Sid };
        let mut text: *mut u16 = std::ptr::null_mut();
        // SAFETY: `sid` points into `buffer`; the string is freed below.
        if unsafe { ConvertSidToStringSidW(sid, &raw mut text) } == 0 {
            return Err(io::Error::last_os_error());
        }
        let string = wide_string(text);
        // SAFETY: allocated by the conversion, freed once.
        unsafe { LocalFree(text.cast()) };
        Ok(string)
    }

    /// A NUL-ended UTF-16 string the system gave us.
    fn wide_string(text: *const u16) -> String {
        let mut length = 0;
        // SAFETY: the system's strings end with a NUL.
        while unsafe { *text.add(length) } != 0 {
            length += 1;
        }
        // SAFETY: `length` units before the NUL.
        String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(text, length) })
    }

    pub(super) fn make_private(path: &Path, _dir: bool) -> io::Result<()> {
        let sddl = wide(super::owner_only_sddl(&user_sid()?).as_ref());
        let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: a NUL-ended string; the descriptor is freed below.
        let parsed = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                sddl.as_ptr(),
                SDDL_REVISION_1,
                &raw mut descriptor,
                std::ptr::null_mut(),
            )
        };
        if parsed == 0 {
            return Err(io::Error::last_os_error());
        }
        let name = wide(path.as_os_str());
        // SAFETY: a NUL-ended path and a valid descriptor.
        let set = unsafe {
            SetFileSecurityW(name.as_ptr(), DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION, descriptor)
        };
        let applied = if set == 0 { Err(io::Error::last_os_error()) } else { Ok(()) };
        // SAFETY: allocated by the conversion above, freed once.
        unsafe { LocalFree(descriptor) };
        applied
    }

    /// The DACL of `path` in SDDL.
    pub(super) fn dacl_of(path: &Path) -> io::Result<String> {
        let name = wide(path.as_os_str());
        let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: a NUL-ended path; the descriptor is freed below.
        check(unsafe {
            GetNamedSecurityInfoW(
                name.as_ptr(),
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &raw mut descriptor,
            )
        })?;
        let mut text: *mut u16 = std::ptr::null_mut();
        // SAFETY: `descriptor` is valid; the string is freed below.
        let converted = unsafe {
            ConvertSecurityDescriptorToStringSecurityDescriptorW(
                descriptor,
                SDDL_REVISION_1,
                DACL_SECURITY_INFORMATION,
                &raw mut text,
                std::ptr::null_mut(),
            )
        };
        let result = if converted == 0 { Err(io::Error::last_os_error()) } else { Ok(wide_string(text)) };
        // SAFETY: each allocated by the calls above, freed once.
        unsafe {
            if !text.is_null() {
                LocalFree(text.cast());
            }
            LocalFree(descriptor);
        }
        result
    }

    pub(super) fn describe_if_open(path: &Path) -> io::Result<Option<String>> {
        let dacl = dacl_of(path)?;
        Ok((!super::dacl_is_private(&dacl, &user_sid()?)).then(|| format!("access list {dacl}")))
    }

    pub(super) fn create_new_private(path: &Path) -> io::Result<File> {
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
        if let Err(error) = make_private(path, false) {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(error);
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_rules_owner_only_modes() {
        assert!(mode_is_private(DIR_MODE) && mode_is_private(FILE_MODE) && mode_is_private(0o400));
        for open in [0o644, 0o640, 0o604, 0o755, 0o701, 0o610] {
            assert!(!mode_is_private(open), "{open:o}");
        }
    }

    #[test]
    fn windows_rules_entries_for_the_user_and_the_system_only() {
        let me = "S-1-5-21-1-2-3-1001";
        let set = owner_only_sddl(me);
        assert_eq!(set, "D:P(A;OICI;FA;;;S-1-5-21-1-2-3-1001)");
        assert!(dacl_is_private(&set, me), "what we set is what we accept");
        // As Windows reads a private file back: inherited from its folder.
        assert!(dacl_is_private(&format!("D:AI(A;ID;FA;;;{me})"), me));
        // A user's profile folder: SYSTEM, Administrators and the user.
        assert!(dacl_is_private(&format!("D:PAI(A;OICIID;FA;;;SY)(A;OICIID;FA;;;BA)(A;OICIID;FA;;;{me})"), me));
        assert!(dacl_is_private("D:P(D;;FA;;;WD)(A;;FA;;;OW)", me), "a deny entry takes access away");
        assert!(!dacl_is_private(&format!("D:P(A;;FA;;;{me})(A;;FR;;;BU)"), me), "Users may read");
        assert!(!dacl_is_private(&format!("D:(A;;FA;;;{me})(A;;0x1200a9;;;WD)"), me), "Everyone may read");
        assert!(!dacl_is_private("D:P(A;;FA;;;S-1-5-21-1-2-3-1002)", me), "another user");
        assert!(!dacl_is_private("D:NO_ACCESS_CONTROL", me), "no DACL: everyone is let in");
        assert!(!dacl_is_private("O:BAG:SY", me), "no DACL at all");
        assert!(dacl_is_private("D:P", me), "an empty protected DACL lets no one in");
    }

    #[test]
    fn a_private_file_is_created_private_and_an_open_one_is_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("state");
        create_private_dir(&folder).unwrap();
        assert_eq!(os::describe_if_open(&folder).unwrap(), None, "the folder is private");
        let file = folder.join("token");
        create_new_private(&file).unwrap();
        assert_eq!(os::describe_if_open(&file).unwrap(), None, "the file is private from the start");
        assert_eq!(create_new_private(&file).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(tighten_file(&file).unwrap(), None, "nothing to tighten");

        let open = dir.path().join("open");
        fs::write(&open, "x").unwrap();
        open_to_others(&open);
        assert!(tighten_file(&open).unwrap().is_some(), "an open file is reported");
        assert_eq!(os::describe_if_open(&open).unwrap(), None, "and made private");
    }

    #[cfg(unix)]
    fn open_to_others(path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
    }

    /// A file in the temporary folder inherits that folder's access list,
    /// which is not the owner's alone.
    #[cfg(windows)]
    fn open_to_others(path: &Path) {
        let _ = path;
        assert!(os::describe_if_open(path).unwrap().is_some(), "a new file outside a private folder is not private");
    }
}
