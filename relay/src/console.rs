//! Whether the terminal behind stderr shows ANSI colours, per system: the
//! one seam over consoles. Whether to use them at all is
//! [`crate::logging::colours`]'s rule.

/// A Windows console shows them once asked to process escape sequences
/// (Windows 10 and later); an older one, or one that refuses, gets plain
/// text rather than `←[2m`.
#[cfg(windows)]
#[allow(unsafe_code)]
pub(crate) fn shows_colours() -> bool {
    use windows_sys::Win32::System::Console::{
        ENABLE_VIRTUAL_TERMINAL_PROCESSING, GetConsoleMode, GetStdHandle, STD_ERROR_HANDLE, SetConsoleMode,
    };
    // SAFETY: plain calls on the process's own standard handle; `mode` is
    // a valid place for the console to write its mode.
    unsafe {
        let handle = GetStdHandle(STD_ERROR_HANDLE);
        let mut mode = 0;
        GetConsoleMode(handle, &mut mode) != 0
            && (mode & ENABLE_VIRTUAL_TERMINAL_PROCESSING != 0
                || SetConsoleMode(handle, mode | ENABLE_VIRTUAL_TERMINAL_PROCESSING) != 0)
    }
}

/// Unix terminals (Linux, macOS) show them.
#[cfg(not(windows))]
pub(crate) fn shows_colours() -> bool {
    true
}
