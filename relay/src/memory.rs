//! The one seam over the allocator, per system: large blocks go back to the
//! system when they are freed.
//!
//! | Linux with glibc | elsewhere (Windows, macOS, musl) |
//! |---|---|
//! | blocks of [`LARGE`] or more from `mmap`, returned when freed (`mallopt(M_MMAP_THRESHOLD)`) | nothing: their allocators return large blocks themselves |
//!
//! A page's messages of megabytes (a console flood of 8 MB strings, a
//! screenshot) pass through serve in allocations of their size. glibc
//! serves the first from `mmap`, but freeing it raises its threshold (up to
//! 32 MiB, and the arenas' trim threshold with it), so the next ones come
//! from its arenas, which keep what is freed, at the top of each thread's
//! heap beyond the reach of `malloc_trim`: serve stayed tens of megabytes
//! above idle after a flood of which it held nothing (issue 46). A fixed
//! threshold turns that adjustment off.

/// Blocks this large or larger are the system's own, given back when freed.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
const LARGE: usize = 1 << 20;

/// Makes freed large blocks go back to the system at once; call it once,
/// as serve starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(crate) fn return_large_blocks() {
    let large = libc::c_int::try_from(LARGE).expect("fits");
    // SAFETY: `mallopt` takes no pointer; it sets glibc's parameters under
    // its own lock.
    if unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, large) } != 1 {
        tracing::debug!("glibc refused the mmap threshold: large blocks stay in its arenas when freed");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn return_large_blocks() {}
