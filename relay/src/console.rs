//! The one seam over consoles, per system: whether the terminal behind
//! stderr shows ANSI colours (whether to use them at all is
//! [`crate::logging::colours`]'s rule), and whether this process has a
//! console window of its own (what a double-click in Explorer gives).

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

/// Whether the console window is this process's alone: Windows made it for
/// us (a double-click in Explorer), and it closes when we end. In a
/// terminal the shell shares it, and Unix has no such window.
#[cfg(windows)]
#[allow(unsafe_code)]
pub(crate) fn window_of_its_own() -> bool {
    use windows_sys::Win32::System::Console::GetConsoleProcessList;
    let mut processes = [0u32; 2];
    // SAFETY: `processes` has room for the count passed; the call writes at
    // most that many ids and returns how many share the console.
    let sharing = unsafe { GetConsoleProcessList(processes.as_mut_ptr(), processes.len() as u32) };
    sharing == 1
}

/// Unix: a terminal always belongs to a shell (or to nothing).
#[cfg(not(windows))]
pub(crate) fn window_of_its_own() -> bool {
    false
}
