//! The one macOS call the process seam makes that `nix` does not wrap:
//! when a process started, from `proc_pidinfo` (libproc, in libSystem).
#![allow(unsafe_code)]

/// Microseconds since the epoch when `pid` started; `None` when it is
/// gone or not ours to look at.
pub(super) fn started(pid: u32) -> Option<u64> {
    let pid = i32::try_from(pid).ok()?;
    let size = i32::try_from(size_of::<libc::proc_bsdinfo>()).ok()?;
    // SAFETY: a zeroed plain-data struct is a valid value of it.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    // SAFETY: the buffer is the flavour's struct and `size` its size; the
    // call writes at most that many bytes into it.
    let written = unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDTBSDINFO, 0, (&raw mut info).cast(), size) };
    (written == size).then(|| info.pbi_start_tvsec.saturating_mul(1_000_000).saturating_add(info.pbi_start_tvusec))
}
